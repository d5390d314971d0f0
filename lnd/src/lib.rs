//! LNet network drivers (LNDs).
