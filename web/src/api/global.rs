//! `GET/PUT /api/v1/global`: the global tunables.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Body, Reader};
use crate::state::AppState;

use super::{TAG_CHANGE, TAG_SHOW};

/// `lnetctl global show`.
#[utoipa::path(get, path = "/api/v1/global", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The global tunables", body = lnet::show::GlobalShow),
        (status = 401, description = "No or unknown token", body = ErrorBody),
    ))]
pub(crate) async fn get_global(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<lnet::show::GlobalShow>, ApiError> {
    let t = s.shared.tunables.lock().await.clone();
    Ok(Json(lnet::show::GlobalShow::from_tunables(&t)))
}

/// Tunables to set (`lnetctl set NAME VALUE` for each key given), checked with the
/// kernel's ranges; the keys left out keep their value. `lnd_timeout` is derived and
/// cannot be set.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct GlobalUpdate {
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub numa_range: Option<i64>,
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub max_interfaces: Option<i64>,
    #[schema(minimum = 0, maximum = 1)]
    pub discovery: Option<i64>,
    #[schema(minimum = 0, maximum = 1)]
    pub drop_asym_route: Option<i64>,
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub retry_count: Option<i64>,
    #[schema(minimum = 1, maximum = 4294967295_u64)]
    pub transaction_timeout: Option<i64>,
    #[schema(minimum = 0, maximum = 1000)]
    pub health_sensitivity: Option<i64>,
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub recovery_interval: Option<i64>,
    #[schema(minimum = 0, maximum = 100)]
    pub router_sensitivity: Option<i64>,
    #[schema(minimum = 0, maximum = 3)]
    pub response_tracking: Option<i64>,
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub recovery_limit: Option<i64>,
    #[schema(minimum = 1, maximum = 4294967295_u64)]
    pub max_recovery_ping_interval: Option<i64>,
}

impl GlobalUpdate {
    fn pairs(&self) -> [(lnet::tunables::TunableName, Option<i64>); 12] {
        use lnet::tunables::TunableName as N;
        [
            (N::NumaRange, self.numa_range),
            (N::MaxInterfaces, self.max_interfaces),
            (N::Discovery, self.discovery),
            (N::DropAsymRoute, self.drop_asym_route),
            (N::RetryCount, self.retry_count),
            (N::TransactionTimeout, self.transaction_timeout),
            (N::HealthSensitivity, self.health_sensitivity),
            (N::RecoveryInterval, self.recovery_interval),
            (N::RouterSensitivity, self.router_sensitivity),
            (N::ResponseTracking, self.response_tracking),
            (N::RecoveryLimit, self.recovery_limit),
            (N::MaxRecoveryPingInterval, self.max_recovery_ping_interval),
        ]
    }

    /// Applies the keys given to `t` in the order `lnetctl import` does: health sensitivity
    /// first, the transaction timeout around the retry count.
    fn apply(&self, t: &mut lnet::tunables::Tunables) -> Result<(), ApiError> {
        use lnet::tunables::TunableName as N;
        let mut global = lnet::config::Global::default();
        for (name, value) in self.pairs() {
            let Some(v) = value else { continue };
            let v = u32::try_from(v).map_err(|_| {
                ApiError::unprocessable(
                    name.as_str(),
                    format!("{name} = {v} is outside 0..=4294967295"),
                )
            })?;
            let slot = match name {
                N::NumaRange => &mut global.numa_range,
                N::MaxInterfaces => &mut global.max_interfaces,
                N::Discovery => &mut global.discovery,
                N::DropAsymRoute => &mut global.drop_asym_route,
                N::RetryCount => &mut global.retry_count,
                N::TransactionTimeout => &mut global.transaction_timeout,
                N::HealthSensitivity => &mut global.health_sensitivity,
                N::RecoveryInterval => &mut global.recovery_interval,
                N::RouterSensitivity => &mut global.router_sensitivity,
                N::ResponseTracking => &mut global.response_tracking,
                N::RecoveryLimit => &mut global.recovery_limit,
                _ => &mut global.max_recovery_ping_interval,
            };
            *slot = Some(v);
        }
        global.apply(t).map_err(tunable_error)
    }
}

fn tunable_error(e: lnet::tunables::TunableError) -> ApiError {
    use lnet::tunables::TunableError as E;
    let field = match &e {
        E::OutOfRange { name, .. } => name.as_str().to_owned(),
        E::TransactionTimeoutNotAboveRetryCount { .. } => "transaction_timeout".into(),
        E::RetryCountAboveTransactionTimeout { .. } | E::RetriesNeedHealth { .. } => {
            "retry_count".into()
        }
        E::UnknownName { name } => name.clone(),
        _ => "global".into(),
    };
    ApiError::Unprocessable {
        field: Some(field),
        message: e.to_string(),
    }
}

/// Sets global tunables (`lnetctl set`), each checked with the kernel's range; all or
/// nothing.
#[utoipa::path(put, path = "/api/v1/global", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = GlobalUpdate,
    responses(
        (status = 200, description = "The tunables now", body = lnet::show::GlobalShow),
        (status = 400, description = "Bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A value outside its range, or an unknown key", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn put_global(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<GlobalUpdate>,
) -> Result<Json<lnet::show::GlobalShow>, ApiError> {
    let mut current = s.shared.tunables.lock().await;
    let mut next = current.clone();
    req.apply(&mut next)?;
    if let Some(store) = &s.shared.config {
        for name in lnet::tunables::TunableName::ALL {
            if next.get(name) != current.get(name) {
                store
                    .set_tunable(name, next.get(name))
                    .map_err(|e| ApiError::Internal {
                        message: format!("{name} could not be kept: {e}"),
                    })?;
            }
        }
    }
    s.shared.node.set_tunables(next.clone()).await?;
    *current = next;
    let doc = lnet::show::GlobalShow::from_tunables(&current);
    drop(current);
    let changed: Vec<String> = req
        .pairs()
        .iter()
        .filter_map(|(n, v)| v.map(|v| format!("{n}={v}")))
        .collect();
    s.admin_event(&admin.0, "set_global", None, changed.join(" "));
    Ok(Json(doc))
}
