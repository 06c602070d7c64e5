//! What a request may do, decided on the route the router matched: each route declares its
//! [`Need`] where it is registered (`super::configure`), and the check reads that
//! declaration and the matched `{topic}`, decoded exactly as the handler decodes it, never
//! the raw path. A percent-encoded, doubly encoded or otherwise respelled path either matches
//! the same route, and is judged by that route's need, or matches none and is 404 before any
//! question of scope.
//!
//! The outer [`super::auth::Auth`] middleware only says who the caller is (its [`Caller`]);
//! this one, wrapped around each route, says whether that caller may call it.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::{Next, from_fn};
use actix_web::{Error, HttpMessage, HttpRequest, Route};

use super::auth::{Caller, Granted};
use super::error::ApiError;
use crate::access::Scope;

/// Which topics a route touches, for a token limited to a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topics {
    /// The one its path names (`{topic}`, decoded as the handler decodes it).
    Named,
    /// None: any valid token may call it (`/v1/token`).
    None,
    /// Every topic (the list of topics): only a token limited to no pattern.
    Every,
}

/// What a route needs: a scope and its topics, or nothing at all (the dashboard's assets,
/// and the operations routes unless `auth_health_and_metrics` is set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// A token of at least this scope, covering these topics.
    Token(Scope, Topics),
    /// Open to everyone: the dashboard's assets, which hold no data.
    Open,
    /// `/health`, `/metrics`, `/openapi.json`: open unless `auth_health_and_metrics`.
    Ops,
}

impl Need {
    /// What it asks, in words (the OpenAPI document's `x-toc-needs`).
    pub(crate) fn words(self) -> String {
        let scope = |s: Scope| format!("{s:?}").to_ascii_lowercase();
        match self {
            Need::Token(s, Topics::Named) => format!("a {} token for the topic", scope(s)),
            Need::Token(s, Topics::Every) => format!("a {} token for every topic", scope(s)),
            Need::Token(_, Topics::None) => "any valid token".into(),
            Need::Open => "nothing".into(),
            Need::Ops => "nothing, unless auth_health_and_metrics (then any valid token)".into(),
        }
    }

    /// The verdict for `caller` on a request whose route matched with `topic`.
    fn judge(
        self,
        caller: &Caller,
        method: &str,
        topic: Option<&str>,
        protect_ops: bool,
    ) -> Result<(), ApiError> {
        let (scope, topics) = match (self, caller) {
            (_, Caller::Open) | (Need::Open, _) => return Ok(()),
            (Need::Ops, _) if !protect_ops => return Ok(()),
            (Need::Ops, _) => (Scope::Read, Topics::None),
            (Need::Token(scope, topics), _) => (scope, topics),
        };
        let Caller::Token(grant) = caller else {
            return Err(ApiError::unauthorized());
        };
        if grant.scope < scope {
            let what = topic.map_or(String::new(), |t| format!(" on topic {t:?}"));
            return Err(ApiError::forbidden(format!(
                "this token's scope is {}; {method} this route{what} needs {scope}",
                grant.scope
            )));
        }
        let Some(pattern) = &grant.pattern else {
            return Ok(());
        };
        let covered = match topics {
            Topics::None => true,
            Topics::Every => false,
            Topics::Named => topic.is_some_and(|t| crate::access::glob(pattern, t)),
        };
        if covered {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "this token is limited to topics matching {pattern}"
            )))
        }
    }
}

/// The `{topic}` of the matched route, decoded as `web::Path` decodes it for the handler.
fn matched_topic(req: &ServiceRequest) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        topic: String,
    }
    req.match_info().load::<Named>().ok().map(|n| n.topic)
}

/// Whether the caller may see what a payload keeps secret (header values, a URL's userinfo,
/// path and query): with auth off, or with a token of `write` scope or more (whose topic the
/// route's need has already checked).
pub(crate) fn sees_secrets(req: &HttpRequest) -> bool {
    match req.extensions().get::<Caller>() {
        Some(Caller::Open) => true,
        Some(Caller::Token(g)) => g.scope >= Scope::Write,
        Some(Caller::Anonymous) | None => false,
    }
}

/// `route`, callable only by a caller its `need` allows.
pub(crate) fn route(need: Need, route: Route) -> Route {
    route.wrap(from_fn(move |req, next| guard(need, req, next)))
}

/// The middleware that holds a route's [`Need`] (`actix_web::middleware::from_fn`).
async fn guard(
    need: Need,
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let (verdict, tenant) = {
        let ext = req.extensions();
        // The outer middleware always says who the caller is; without it, nobody.
        let caller = ext.get::<Caller>().unwrap_or(&Caller::Anonymous);
        let protect_ops = ext.get::<super::auth::ProtectOps>().is_some();
        let topic = matched_topic(&req);
        let verdict = need.judge(caller, req.method().as_str(), topic.as_deref(), protect_ops);
        (verdict, tenant_of(caller))
    };
    if let Err(e) = verdict {
        let res = actix_web::ResponseError::error_response(&e);
        return Ok(req.into_response(res).map_into_right_body());
    }
    // The handler acts for the caller's tenant (the topics it makes are that tenant's).
    let res = crate::tenant::acting_for(tenant, next.call(req)).await?;
    Ok(res.map_into_left_body())
}

/// The tenant a caller acts for: a token's topic pattern; none for a token for every topic
/// or with auth off (`crate::tenant`).
pub(crate) fn tenant_of(caller: &Caller) -> Option<String> {
    match caller {
        Caller::Token(g) => g.pattern.clone(),
        Caller::Open | Caller::Anonymous => None,
    }
}

/// A token's grant as the handlers see it.
pub(crate) fn granted(req: &HttpRequest) -> Option<Granted> {
    match req.extensions().get::<Caller>() {
        Some(Caller::Token(g)) => Some(g.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(scope: Scope, pattern: Option<&str>) -> Caller {
        Caller::Token(Granted {
            scope,
            pattern: pattern.map(str::to_string),
        })
    }

    #[test]
    fn a_need_is_judged_on_the_matched_topic() {
        use Scope::*;
        let admin_named = Need::Token(Admin, Topics::Named);
        assert!(
            admin_named
                .judge(&Caller::Open, "PUT", Some("t"), false)
                .is_ok()
        );
        assert_eq!(
            admin_named
                .judge(&Caller::Anonymous, "PUT", Some("t"), false)
                .unwrap_err()
                .status,
            401
        );
        let e = admin_named
            .judge(&token(Write, None), "DELETE", Some("victim"), false)
            .unwrap_err();
        assert_eq!(e.status, 403);
        assert!(e.message.contains("needs admin"), "{}", e.message);
        assert!(
            admin_named
                .judge(&token(Admin, None), "PUT", Some("t"), false)
                .is_ok()
        );
        let orders = token(Write, Some("orders*"));
        let w = Need::Token(Write, Topics::Named);
        assert!(w.judge(&orders, "PUT", Some("orders-eu"), false).is_ok());
        assert!(w.judge(&orders, "PUT", Some("billing"), false).is_err());
        assert!(w.judge(&orders, "PUT", None, false).is_err());
        assert!(
            Need::Token(Read, Topics::Every)
                .judge(&orders, "GET", None, false)
                .is_err()
        );
        assert!(
            Need::Token(Read, Topics::None)
                .judge(&orders, "GET", None, false)
                .is_ok()
        );
        assert!(
            Need::Ops
                .judge(&Caller::Anonymous, "GET", None, false)
                .is_ok()
        );
        assert!(
            Need::Ops
                .judge(&Caller::Anonymous, "GET", None, true)
                .is_err()
        );
        assert!(Need::Ops.judge(&orders, "GET", None, true).is_ok());
        assert!(
            Need::Open
                .judge(&Caller::Anonymous, "GET", None, true)
                .is_ok()
        );
    }
}
