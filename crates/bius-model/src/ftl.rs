//! The flash translation layer of a conventional SSD (placeholder: the
//! profile section only; the page-mapping FTL comes next).

use serde::{Deserialize, Serialize};

use crate::profile::{positive, ProfileError};
use crate::quantity;

/// The FTL of a conventional SSD profile (`[ftl]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FtlProfile {
    /// Spare flash beyond the host-visible capacity, as a fraction of it
    /// (NVMeVirt's `OP_AREA_PERCENT`: 0.07 for 7 %).
    pub over_provisioning: f64,
    /// Bytes of an erase block on one die.
    #[serde(with = "quantity::bytes")]
    pub block_size: u64,
}

impl FtlProfile {
    pub(crate) fn check(&self) -> Result<(), ProfileError> {
        positive("ftl.over_provisioning", self.over_provisioning)
    }
}
