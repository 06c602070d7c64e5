//! Bearer-token auth: with tokens configured, a request needs `Authorization: Bearer <token>`
//! matching one of them. Tokens are compared in constant time and never logged.

use std::future::{Ready, ready};
use std::rc::Rc;
use std::sync::Arc;

use actix_web::Error;
use actix_web::body::EitherBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform, forward_ready};
use futures_util::future::LocalBoxFuture;
use subtle::ConstantTimeEq;

use super::error::ApiError;

/// Paths outside `/v1` that stay open unless `protect_ops` is set.
const OPS: &[&str] = &["/health", "/metrics", "/openapi.json"];

#[derive(Clone)]
pub(crate) struct Auth {
    tokens: Arc<Vec<String>>,
    protect_ops: bool,
}

impl Auth {
    pub(crate) fn new(tokens: Vec<String>, protect_ops: bool) -> Self {
        Auth {
            tokens: Arc::new(tokens),
            protect_ops,
        }
    }

    fn allows(&self, req: &ServiceRequest) -> bool {
        if self.tokens.is_empty() || super::ui::PATHS.contains(&req.path()) {
            return true;
        }
        if !self.protect_ops && OPS.contains(&req.path()) {
            return true;
        }
        let Some(given) = req
            .headers()
            .get(actix_web::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return false;
        };
        // Every token is compared, so the time taken does not say which one nearly matched.
        self.tokens.iter().fold(false, |ok, t| {
            ok | bool::from(t.as_bytes().ct_eq(given.trim().as_bytes()))
        })
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
        if !self.auth.allows(&req) {
            let res = actix_web::ResponseError::error_response(&ApiError::unauthorized());
            return Box::pin(async move { Ok(req.into_response(res).map_into_right_body()) });
        }
        let service = self.service.clone();
        Box::pin(async move { service.call(req).await.map(|r| r.map_into_left_body()) })
    }
}
