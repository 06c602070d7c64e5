//! The dashboard at `/ui`: one HTML page, one stylesheet and one script, embedded in the
//! binary (no build step, no CDN). The assets hold no data and are open to everyone; the
//! script reads everything through the API with the token the user gives it, so tokens
//! guard the dashboard exactly as they guard the API.

use actix_web::{HttpResponse, web};

const PAGE: &str = include_str!("ui/index.html");
const STYLE: &str = include_str!("ui/app.css");
const SCRIPT: &str = include_str!("ui/app.js");

/// The page's policy: its own script and stylesheet only (no inline script or style, no
/// other origin), API calls to its own origin, and never in another site's frame.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Content-Security-Policy", CONTENT_SECURITY_POLICY))
        .insert_header(("X-Frame-Options", "DENY"))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .body(body)
}

async fn page() -> HttpResponse {
    asset("text/html; charset=utf-8", PAGE)
}

async fn style() -> HttpResponse {
    asset("text/css; charset=utf-8", STYLE)
}

async fn script() -> HttpResponse {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// The dashboard's routes.
pub(crate) fn configure(cfg: &mut web::ServiceConfig) {
    use super::guard::{Need, route};
    // A URL per view (`/ui/topics/{topic}`, `.../jobs/{id}`, `.../dead`): the same page,
    // which opens the view its path names, so a reload or a link from an alert keeps it.
    cfg.service(
        web::resource(["/ui", "/ui/", "/ui/topics/{rest:.*}"])
            .route(route(Need::Open, web::get().to(page))),
    )
    .service(web::resource("/ui/app.css").route(route(Need::Open, web::get().to(style))))
    .service(web::resource("/ui/app.js").route(route(Need::Open, web::get().to(script))));
}
