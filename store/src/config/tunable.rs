//! Global tunables, keyed by their `lnetctl set` name, each a big-endian `u32`.

use lnet::config::{Config, Global, RoutingState};
use lnet::tunables::TunableName;

use crate::engine::{decode_key, decode_value_with, TreeId, WriteSet};
use crate::error::{DecodeError, StoreError};
use crate::keys;
use crate::Store;

pub(super) fn tunable_key(name: TunableName) -> &'static [u8] {
    name.as_str().as_bytes()
}

fn decode_tunable_value(bytes: &[u8]) -> Result<u32, DecodeError> {
    keys::decode_u32(bytes)
}

/// A key and value of the tunables tree, decoded as a read decodes them.
pub(crate) fn decode_tunable_entry(k: &[u8], v: &[u8]) -> Result<(TunableName, u32), StoreError> {
    let name = decode_key(TreeId::Tunables, k, keys::decode_tunable)?;
    let value = decode_value_with(TreeId::Tunables, k, v, decode_tunable_value)?;
    Ok((name, value))
}

pub(super) fn global_field(g: &mut Global, name: TunableName) -> Option<&mut Option<u32>> {
    use TunableName as N;
    Some(match name {
        N::NumaRange => &mut g.numa_range,
        N::MaxInterfaces => &mut g.max_interfaces,
        N::Discovery => &mut g.discovery,
        N::DropAsymRoute => &mut g.drop_asym_route,
        N::RetryCount => &mut g.retry_count,
        N::TransactionTimeout => &mut g.transaction_timeout,
        N::HealthSensitivity => &mut g.health_sensitivity,
        N::RecoveryInterval => &mut g.recovery_interval,
        N::RouterSensitivity => &mut g.router_sensitivity,
        N::ResponseTracking => &mut g.response_tracking,
        N::RecoveryLimit => &mut g.recovery_limit,
        N::MaxRecoveryPingInterval => &mut g.max_recovery_ping_interval,
        _ => return None,
    })
}

/// The tunables a document sets, in the store's form.
pub(super) fn document_tunables(config: &Config) -> Vec<(TunableName, u32)> {
    let mut out = Vec::new();
    if let Some(g) = &config.global {
        for (name, v) in g.settable() {
            if let Some(v) = v {
                out.push((name, v));
            }
        }
    }
    if let Some(b) = &config.buffers {
        for (name, v) in [
            (TunableName::TinyBuffers, b.tiny),
            (TunableName::SmallBuffers, b.small),
            (TunableName::LargeBuffers, b.large),
        ] {
            if let Some(v) = v {
                out.push((name, v));
            }
        }
    }
    if let Some(r) = &config.routing {
        out.push((TunableName::Routing, r.enable.to_u32()));
    }
    out
}

impl Store {
    pub(super) fn read_tunables(&self) -> Result<Vec<(TunableName, u32)>, StoreError> {
        self.trees
            .scan_raw(TreeId::Tunables)?
            .into_iter()
            .map(|(k, v)| decode_tunable_entry(&k, &v))
            .collect()
    }

    /// The tunables that are set, by name.
    pub fn tunables(&self) -> Result<Vec<(TunableName, u32)>, StoreError> {
        let _guard = self.lock();
        self.read_tunables()
    }

    /// One tunable, `None` when not set.
    pub fn tunable(&self, name: TunableName) -> Result<Option<u32>, StoreError> {
        let _guard = self.lock();
        let key = tunable_key(name);
        self.trees
            .get_raw(TreeId::Tunables, key)?
            .map(|v| decode_value_with(TreeId::Tunables, key, &v, decode_tunable_value))
            .transpose()
    }

    /// Sets a tunable (`lnetctl set NAME VALUE`). The caller checks the value with
    /// [`lnet::tunables::Tunables::set`] first; `routing` is kept as the `routing:`
    /// section's state (0 to 3) and refused above that.
    pub fn set_tunable(&self, name: TunableName, value: u32) -> Result<(), StoreError> {
        if name == TunableName::Routing && RoutingState::from_u32(value).is_none() {
            return Err(StoreError::InvalidArgument {
                what: "routing",
                reason: format!("{value} is not a routing state (0 to 3)"),
            });
        }
        let _guard = self.lock();
        let mut set = WriteSet::new();
        set.put_raw(
            TreeId::Tunables,
            tunable_key(name),
            value.to_be_bytes().to_vec(),
        );
        self.trees.commit(set)
    }

    /// Forgets a tunable, so that the kernel default applies again; whether it was set.
    pub fn unset_tunable(&self, name: TunableName) -> Result<bool, StoreError> {
        let _guard = self.lock();
        let key = tunable_key(name);
        if self.trees.get_raw(TreeId::Tunables, key)?.is_none() {
            return Ok(false);
        }
        let mut set = WriteSet::new();
        set.remove(TreeId::Tunables, key);
        self.trees.commit(set)?;
        Ok(true)
    }
}
