//! Bearer-token auth with scopes (`crate::access`): with tokens configured, a request needs
//! `Authorization: Bearer <token>` matching one of them (401), whose scope and topic pattern
//! allow the call (403 naming what it lacks). A request with a valid token carries its
//! [`Granted`] to the handlers (`/health` shows its detail only then). With auth off, a
//! request whose `Host` is a name other than `localhost` or `http.allowed_hosts` is refused
//! (403): a web page a developer opens cannot drive a local instance by DNS rebinding.
//! Tokens are compared as digests in constant time and never logged.

use std::future::{Ready, ready};
use std::rc::Rc;
use std::sync::Arc;

use actix_web::Error;
use actix_web::HttpMessage;
use actix_web::body::EitherBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform, forward_ready};
use futures_util::future::LocalBoxFuture;

use super::error::ApiError;
use crate::access::{self, Grant, Scope};
use crate::config::Settings;

/// Paths outside `/v1` that stay open unless `protect_ops` is set.
const OPS: &[&str] = &["/health", "/metrics", "/openapi.json"];

/// The token a request was made with, for the handlers: its scope and topic pattern.
#[derive(Debug, Clone)]
pub(crate) struct Granted {
    pub scope: Scope,
    pub pattern: Option<String>,
}

#[derive(Clone)]
pub(crate) struct Auth {
    grants: Arc<Vec<Grant>>,
    protect_ops: bool,
    allowed_hosts: Arc<Vec<String>>,
}

/// What the middleware does with a request.
enum Verdict {
    Pass(Option<Granted>),
    Refuse(ApiError),
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

    fn judge(&self, req: &ServiceRequest) -> Verdict {
        let path = req.path();
        if self.grants.is_empty() {
            return match self.host_allowed(req) {
                true => Verdict::Pass(None),
                false => Verdict::Refuse(ApiError::forbidden(
                    "this Host is not served with auth off (DNS rebinding): call by IP address or localhost, or add the name to http.allowed_hosts",
                )),
            };
        }
        let given = req
            .headers()
            .get(actix_web::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .and_then(|t| access::find(&self.grants, t));
        let granted = given.map(|g| Granted {
            scope: g.scope,
            pattern: g.pattern.clone(),
        });
        let open = super::ui::PATHS.contains(&path) || (!self.protect_ops && OPS.contains(&path));
        if open {
            return Verdict::Pass(granted);
        }
        let Some(grant) = given else {
            return Verdict::Refuse(ApiError::unauthorized());
        };
        let need = access::required(req.method().as_str(), path);
        if grant.scope < need {
            return Verdict::Refuse(ApiError::forbidden(format!(
                "this token's scope is {}; {} {path} needs {need}",
                grant.scope,
                req.method()
            )));
        }
        if let Some(pattern) = &grant.pattern {
            let covered = match access::topic_of(path) {
                Some(topic) => grant.covers(topic),
                // Its own grant, and the operations routes, name no topic.
                None => path == "/v1/token" || OPS.contains(&path),
            };
            if !covered {
                return Verdict::Refuse(ApiError::forbidden(format!(
                    "this token is limited to topics matching {pattern}"
                )));
            }
        }
        Verdict::Pass(granted)
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

impl<S, B> Transform<S, ServiceRequest> for Auth
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    B: 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = Error;
    type Transform = AuthMiddleware<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(AuthMiddleware {
            service: Rc::new(service),
            auth: self.clone(),
        }))
    }
}

pub(crate) struct AuthMiddleware<S> {
    service: Rc<S>,
    auth: Auth,
}

impl<S, B> Service<ServiceRequest> for AuthMiddleware<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    B: 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = Error;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        match self.auth.judge(&req) {
            Verdict::Refuse(e) => {
                let res = actix_web::ResponseError::error_response(&e);
                return Box::pin(async move { Ok(req.into_response(res).map_into_right_body()) });
            }
            Verdict::Pass(Some(granted)) => {
                req.extensions_mut().insert(granted);
            }
            Verdict::Pass(None) => {}
        }
        let service = self.service.clone();
        Box::pin(async move { service.call(req).await.map(|r| r.map_into_left_body()) })
    }
}
