//! Tests of the NBD client.
