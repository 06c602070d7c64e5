//! Who a request acts for: its tenant. With tokens set, a token limited to a topic pattern
//! (`orders*`) is a tenant, named by its pattern; a token for every topic, and every caller
//! with auth off, acts for no tenant (the operator). A topic records the tenant that made it
//! (`TopicConfig::tenant`), and the shares that keep one team from crowding another are
//! counted per tenant as well as per topic: topics and slots (`limits.max_topics_per_tenant`,
//! `limits.max_slots_per_tenant`), jobs and their bytes (`limits.max_jobs_per_tenant`,
//! `limits.max_bytes_per_tenant`), long polls (`limits.max_long_polls_per_tenant`) and
//! webhook calls in flight (`webhooks.max_in_flight_per_tenant`), so making more topics buys
//! a tenant nothing.
//!
//! The HTTP layer says whom each request acts for ([`acting_for`], around the route's
//! handler, from the caller its guard judged); the center and the store read it
//! ([`current`]) where a topic is made. A library caller acts for no tenant.

use std::future::Future;

tokio::task_local! {
    static TENANT: Option<String>;
}

/// Runs `f` acting for `tenant`.
pub(crate) async fn acting_for<F: Future>(tenant: Option<String>, f: F) -> F::Output {
    TENANT.scope(tenant, f).await
}

/// The tenant the running request acts for, if any.
pub(crate) fn current() -> Option<String> {
    TENANT.try_with(Clone::clone).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_acts_for_its_tenant_and_no_other_code_does() {
        assert_eq!(current(), None);
        let inside = acting_for(Some("orders*".into()), async { current() }).await;
        assert_eq!(inside, Some("orders*".to_string()));
        assert_eq!(acting_for(None, async { current() }).await, None);
        assert_eq!(current(), None);
    }
}
