//! Who the caller is: with tokens configured, `Authorization: Bearer <token>` matching one
//! of them makes the request's [`Caller`] that token's grant; no token, or a wrong one, makes
//! it anonymous. Whether the caller may call the route it reaches is decided after routing,
//! on the matched route, by `super::guard` (a 401 or a 403 naming what it lacks); a request
//! that matches no route is 404 whoever sends it. Tokens are compared as digests in constant
//! time and never logged.
//!
//! With auth off, two refusals here keep a web page a developer opens from driving a local
//! instance: a `Host` that is a name other than `localhost` or `http.allowed_hosts` (DNS
//! rebinding), and a request that changes state whose `Origin` names another origin or whose
//! `Sec-Fetch-Site` says another site (a cross-site form or `fetch` without a preflight).

use std::sync::Arc;

use actix_web::Error;
use actix_web::HttpMessage;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;

use super::error::ApiError;
use crate::access::{self, Grant, Scope};
use crate::config::Settings;

/// The token a request was made with, for the handlers: its scope and topic pattern.
#[derive(Debug, Clone)]
pub(crate) struct Granted {
    pub scope: Scope,
    pub pattern: Option<String>,
}

/// Who made a request, as the routes' guards judge it.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    /// Auth is off: every call is allowed.
    Open,
    /// A valid token.
    Token(Granted),
    /// Auth is on and the request carried no valid token.
    Anonymous,
}

#[derive(Clone)]
pub(crate) struct Auth {
    grants: Arc<Vec<Grant>>,
    protect_ops: bool,
    allowed_hosts: Arc<Vec<String>>,
}

impl Auth {
    pub(crate) fn new(settings: &Settings) -> Self {
        Auth {
            // Validated when the settings were loaded.
            grants: Arc::new(
                settings
                    .tokens
                    .iter()
                    .filter_map(|t| Grant::parse(t).ok())
                    .collect(),
            ),
            protect_ops: settings.auth_health_and_metrics,
            allowed_hosts: Arc::new(
                settings
                    .http
                    .allowed_hosts
                    .iter()
                    .map(|h| h.to_ascii_lowercase())
                    .collect(),
            ),
        }
    }

    /// Who the caller is, or the refusal of a request that auth off does not serve.
    fn identify(&self, req: &ServiceRequest) -> Result<Caller, ApiError> {
        if self.grants.is_empty() {
            if !self.host_allowed(req) {
                return Err(ApiError::forbidden(
                    "this Host is not served with auth off (DNS rebinding): call by IP address or localhost, or add the name to http.allowed_hosts",
                ));
            }
            if changes_state(req.method()) && cross_site(req) {
                return Err(ApiError::forbidden(
                    "a request from another site's page is not served with auth off (its Origin or Sec-Fetch-Site names another origin): set tokens to serve browsers of other origins",
                ));
            }
            return Ok(Caller::Open);
        }
        let given = req
            .headers()
            .get(actix_web::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .and_then(|t| access::find(&self.grants, t));
        Ok(match given {
            Some(g) => Caller::Token(Granted {
                scope: g.scope,
                pattern: g.pattern.clone(),
            }),
            None => Caller::Anonymous,
        })
    }

    /// With auth off: a `Host` that is an IP address, `localhost`, or an allowed name.
    fn host_allowed(&self, req: &ServiceRequest) -> bool {
        let Some(host) = req
            .headers()
            .get(actix_web::http::header::HOST)
            .and_then(|h| h.to_str().ok())
        else {
            return true;
        };
        let name = match host.strip_prefix('[') {
            Some(v6) => {
                return v6
                    .split(']')
                    .next()
                    .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok());
            }
            None => host.rsplit_once(':').map_or(host, |(n, _)| n),
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        name.parse::<std::net::Ipv4Addr>().is_ok()
            || name == "localhost"
            || self.allowed_hosts.contains(&name)
    }
}

/// Every method but the safe ones.
fn changes_state(method: &actix_web::http::Method) -> bool {
    !matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS")
}

/// Whether a browser says the request comes from a page of another origin: `Sec-Fetch-Site`
/// other than `same-origin` or `none` (a user's own navigation), or an `Origin` whose host
/// and port are not the request's `Host`. A client that is no browser sends neither.
fn cross_site(req: &ServiceRequest) -> bool {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap_or("(not text)").to_ascii_lowercase())
    };
    if let Some(site) = header("sec-fetch-site")
        && site != "same-origin"
        && site != "none"
    {
        return true;
    }
    let Some(origin) = header("origin") else {
        return false;
    };
    let host = header("host").unwrap_or_default();
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    authority.is_none_or(|a| a.trim_end_matches('/') != host)
}

impl Auth {
    /// The middleware (`actix_web::middleware::from_fn`): says who the caller is, or
    /// answers at once when the request is refused before any route.
    pub(crate) async fn identify_caller(
        self,
        req: ServiceRequest,
        next: Next<impl MessageBody + 'static>,
    ) -> Result<ServiceResponse<impl MessageBody>, Error> {
        match self.identify(&req) {
            Err(e) => {
                let res = actix_web::ResponseError::error_response(&e);
                return Ok(req.into_response(res).map_into_right_body());
            }
            Ok(caller) => {
                let mut ext = req.extensions_mut();
                ext.insert(caller);
                if self.protect_ops {
                    ext.insert(ProtectOps);
                }
            }
        }
        Ok(next.call(req).await?.map_into_left_body())
    }
}

/// Set on a request by the outer middleware when `auth_health_and_metrics` is on: the
/// guard then asks a token of `/health` and `/metrics` too.
#[derive(Clone, Copy)]
pub(crate) struct ProtectOps;
