//! How the kernel schedules a device's queue threads: [`Scheduling`].

use std::fmt;

use crate::kernel::sched;

/// The scheduling policy of the threads that serve a device's queues
/// (default: [`Scheduling::Batch`]); see
/// [`DeviceBuilder::scheduling`](crate::DeviceBuilder::scheduling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Scheduling {
    /// `SCHED_BATCH`: a woken queue thread does not preempt the task
    /// running on its CPU (often the application that just submitted a
    /// request) but waits for it to sleep or for its time slice to end,
    /// by then usually with several requests to fetch at once.  The
    /// thread keeps its nice value and its share of the CPU.
    #[default]
    Batch,
    /// The policy of the thread that creates the device (normally
    /// `SCHED_OTHER`, or what `chrt` gave it): a woken queue thread may
    /// preempt the submitter at once, one request per wake-up.
    Inherit,
}

impl Scheduling {
    /// Puts the calling queue thread (of queue `queue`) under this policy,
    /// or logs why it cannot; the thread serves either way.
    pub(crate) fn apply(self, queue: u32) {
        if self == Scheduling::Batch {
            if let Err(errno) = sched::set_batch() {
                log::warn!("queue {queue}: cannot set SCHED_BATCH: {errno}; serving under the inherited policy");
            }
        }
    }
}

impl fmt::Display for Scheduling {
    /// `batch` or `inherit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scheduling::Batch => "batch",
            Scheduling::Inherit => "inherit",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each policy applied on a thread of its own, as a queue thread
    /// applies it: batch sets SCHED_BATCH, inherit keeps the creator's.
    #[test]
    fn apply_sets_the_thread_policy() {
        let policy_after = |scheduling: Scheduling| {
            std::thread::spawn(move || {
                scheduling.apply(0);
                sched::is_batch().unwrap()
            })
            .join()
            .unwrap()
        };
        let creator = sched::is_batch().unwrap();
        assert!(policy_after(Scheduling::Batch));
        assert_eq!(policy_after(Scheduling::Inherit), creator);
        assert_eq!(
            sched::is_batch().unwrap(),
            creator,
            "only the queue thread changed"
        );
    }
}
