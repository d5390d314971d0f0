//! Reading `routing:`. It has two shapes, a map (`--backup`) and a list (`routing show`),
//! so it is read by hand; errors still go through serde and carry the parser's position.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::config::global::{CptBuffers, Routing, RoutingState};

impl<'de> Deserialize<'de> for RoutingState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RoutingState, D::Error> {
        let v = u32::deserialize(d)?;
        RoutingState::from_u32(v).ok_or_else(|| {
            de::Error::invalid_value(
                de::Unexpected::Unsigned(u64::from(v)),
                &"0 (disabled), 1 (enabled), 2 (stopping) or 3 (starting)",
            )
        })
    }
}

impl<'de> Deserialize<'de> for Routing {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Routing, D::Error> {
        d.deserialize_any(RoutingVisitor)
    }
}

struct RoutingVisitor;

const ROUTING_KEYS: &[&str] = &["enable"];
const ROUTING_ITEM_KEYS: &[&str] = &["cpt[N]", "enable"];

impl<'de> Visitor<'de> for RoutingVisitor {
    type Value = Routing;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map with `enable`, or a list of `cpt[N]` items and an `enable` item")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Routing, A::Error> {
        let mut enable = None;
        while let Some(key) = map.next_key::<String>()? {
            if key != "enable" {
                return Err(de::Error::unknown_field(&key, ROUTING_KEYS));
            }
            if enable.is_some() {
                return Err(de::Error::duplicate_field("enable"));
            }
            enable = Some(map.next_value::<RoutingState>()?);
        }
        let enable = enable.ok_or_else(|| de::Error::missing_field("enable"))?;
        Ok(Routing {
            enable,
            cpts: Vec::new(),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Routing, A::Error> {
        let mut cpts = Vec::new();
        let mut enable = None;
        while let Some(item) = seq.next_element::<RoutingItem>()? {
            match item {
                RoutingItem::Cpt(n, buffers) => {
                    if n != cpts.len() || enable.is_some() {
                        return Err(de::Error::custom(format_args!(
                            "routing: cpt[{n}] out of order: expected cpt[{}] before `enable`",
                            cpts.len()
                        )));
                    }
                    cpts.push(buffers);
                }
                RoutingItem::Enable(state) => {
                    if enable.is_some() {
                        return Err(de::Error::duplicate_field("enable"));
                    }
                    enable = Some(state);
                }
            }
        }
        let enable = enable.ok_or_else(|| de::Error::missing_field("enable"))?;
        Ok(Routing { enable, cpts })
    }
}

enum RoutingItem {
    Cpt(usize, CptBuffers),
    Enable(RoutingState),
}

impl<'de> Deserialize<'de> for RoutingItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RoutingItem, D::Error> {
        d.deserialize_map(RoutingItemVisitor)
    }
}

struct RoutingItemVisitor;

impl<'de> Visitor<'de> for RoutingItemVisitor {
    type Value = RoutingItem;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a `cpt[N]:` item or an `enable:` item")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RoutingItem, A::Error> {
        let key = map
            .next_key::<String>()?
            .ok_or_else(|| de::Error::missing_field("enable"))?;
        let item = if key == "enable" {
            RoutingItem::Enable(map.next_value()?)
        } else {
            let n = key
                .strip_prefix("cpt[")
                .and_then(|k| k.strip_suffix(']'))
                .filter(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|k| k.parse::<usize>().ok())
                .ok_or_else(|| de::Error::unknown_field(&key, ROUTING_ITEM_KEYS))?;
            RoutingItem::Cpt(n, map.next_value()?)
        };
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::unknown_field(&extra, ROUTING_ITEM_KEYS));
        }
        Ok(item)
    }
}
