//! o2iblnd: the LND that carries LNet over InfiniBand/RoCE reliable connections (ko2iblnd).
//!
//! [`wire`] is the pure codec of its messages: the `kib_msg` header and bodies, RDMA
//! descriptors, the connection-reject private data and the optional checksum. It does no
//! verbs calls, opens no sockets and reads no clock.

pub mod wire;
