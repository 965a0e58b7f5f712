//! The order of zone management against writes, for zoned devices with
//! many requests in flight: a management operation of a zone waits for the
//! zone's writes (and appends) before it, and the zone's writes after it
//! wait for it; a reset of all zones does so for every zone.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::Io;
use crate::request::Command;

/// What a request is to the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Not ordered (reads, reports, flushes, ...).
    Free,
    /// A write or append of the zone with this index.
    Write(u64),
    /// An open, close, finish or reset of the zone with this index.
    Manage(u64),
    ResetAll,
}

/// What an admitted request holds of the gate, given back when it
/// completes.
#[derive(Default)]
pub(crate) enum GateTicket {
    /// Not gated.
    #[default]
    None,
    Write(Arc<ZoneGate>, u64),
    Manage(Arc<ZoneGate>, u64),
    ResetAll(Arc<ZoneGate>),
}

impl GateTicket {
    /// Gives the ticket back; returns the requests that may now be
    /// submitted, in order.
    pub(crate) fn finish(self) -> Vec<Io> {
        let (gate, zone) = match &self {
            GateTicket::None => return Vec::new(),
            GateTicket::Write(gate, zone) | GateTicket::Manage(gate, zone) => (gate, Some(*zone)),
            GateTicket::ResetAll(gate) => (gate, None),
        };
        let mut state = gate.lock();
        match &self {
            GateTicket::Write(_, zone) => {
                state.writes -= 1;
                state.zone(*zone).writes -= 1;
            }
            GateTicket::Manage(_, zone) => {
                state.managing -= 1;
                state.zone(*zone).managing = false;
            }
            GateTicket::ResetAll(_) => state.reset_all = false,
            GateTicket::None => {}
        }
        let mut released = Vec::new();
        if let Some(zone) = zone {
            state.release_zone(gate, zone, &mut released);
        }
        state.release_held(gate, &mut released);
        released
    }
}

#[derive(Default)]
struct ZoneTraffic {
    /// Writes and appends in flight.
    writes: usize,
    /// A management operation is in flight.
    managing: bool,
    /// Requests waiting, in arrival order.
    held: VecDeque<Io>,
}

#[derive(Default)]
struct GateState {
    /// Zones with traffic (removed when they have none).
    zones: HashMap<u64, ZoneTraffic>,
    writes: usize,
    managing: usize,
    /// Requests waiting in zones' queues.
    zone_held: usize,
    reset_all: bool,
    /// Requests waiting behind a reset of all zones, in arrival order.
    held: VecDeque<Io>,
}

/// The order of zone management and writes of one zoned device (shared by
/// its queues).
pub(crate) struct ZoneGate {
    zone_bytes: u64,
    state: Mutex<GateState>,
}

impl ZoneGate {
    pub(crate) fn new(zone_bytes: u64) -> Arc<Self> {
        Arc::new(ZoneGate {
            zone_bytes: zone_bytes.max(1),
            state: Mutex::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn class(&self, command: Command) -> Class {
        match command {
            Command::Write { offset, .. } | Command::ZoneAppend { offset, .. } => {
                Class::Write(offset / self.zone_bytes)
            }
            Command::ZoneOpen { offset }
            | Command::ZoneClose { offset }
            | Command::ZoneFinish { offset }
            | Command::ZoneReset { offset } => Class::Manage(offset / self.zone_bytes),
            Command::ZoneResetAll => Class::ResetAll,
            _ => Class::Free,
        }
    }

    /// The request if it may be submitted now (holding its ticket), else
    /// `None`: the gate keeps it until the requests it waits for complete.
    pub(crate) fn admit(self: &Arc<Self>, io: Io) -> Option<Io> {
        if self.class(io.command()) == Class::Free {
            return Some(io);
        }
        let mut state = self.lock();
        if state.reset_all || !state.held.is_empty() {
            state.held.push_back(io);
            return None;
        }
        state.place(self, io)
    }
}

impl GateState {
    fn zone(&mut self, zone: u64) -> &mut ZoneTraffic {
        self.zones.entry(zone).or_default()
    }

    /// Admits `io` (not behind a reset of all zones) or queues it in its
    /// zone.
    fn place(&mut self, gate: &Arc<ZoneGate>, io: Io) -> Option<Io> {
        let class = gate.class(io.command());
        let zone = match class {
            Class::Write(zone) | Class::Manage(zone) => zone,
            Class::Free => return Some(io),
            Class::ResetAll => {
                if self.writes > 0 || self.managing > 0 || self.zone_held > 0 {
                    self.held.push_back(io);
                    return None;
                }
                return Some(self.admit(gate, class, io));
            }
        };
        let traffic = self.zone(zone);
        if traffic.held.is_empty() && self.admissible(class) {
            return Some(self.admit(gate, class, io));
        }
        self.zone(zone).held.push_back(io);
        self.zone_held += 1;
        None
    }

    /// Whether a request of `class` at the head of its zone's queue may
    /// be submitted.
    fn admissible(&mut self, class: Class) -> bool {
        match class {
            Class::Write(zone) => !self.zone(zone).managing,
            Class::Manage(zone) => {
                let traffic = self.zone(zone);
                !traffic.managing && traffic.writes == 0
            }
            Class::Free | Class::ResetAll => true,
        }
    }

    fn admit(&mut self, gate: &Arc<ZoneGate>, class: Class, mut io: Io) -> Io {
        *io.gate_mut() = match class {
            Class::Write(zone) => {
                self.writes += 1;
                self.zone(zone).writes += 1;
                GateTicket::Write(Arc::clone(gate), zone)
            }
            Class::Manage(zone) => {
                self.managing += 1;
                self.zone(zone).managing = true;
                GateTicket::Manage(Arc::clone(gate), zone)
            }
            Class::ResetAll => {
                self.reset_all = true;
                GateTicket::ResetAll(Arc::clone(gate))
            }
            Class::Free => GateTicket::None,
        };
        io
    }

    /// Admits the requests at the head of `zone`'s queue that may now go.
    fn release_zone(&mut self, gate: &Arc<ZoneGate>, zone: u64, out: &mut Vec<Io>) {
        while let Some(front) = self.zone(zone).held.front() {
            let class = gate.class(front.command());
            if !self.admissible(class) {
                break;
            }
            let io = self.zone(zone).held.pop_front().expect("front");
            self.zone_held -= 1;
            out.push(self.admit(gate, class, io));
        }
        let traffic = self.zone(zone);
        if traffic.writes == 0 && !traffic.managing && traffic.held.is_empty() {
            self.zones.remove(&zone);
        }
    }

    /// Moves the requests behind a reset of all zones on, in order, once
    /// it has completed.
    fn release_held(&mut self, gate: &Arc<ZoneGate>, out: &mut Vec<Io>) {
        while !self.reset_all {
            let Some(io) = self.held.pop_front() else {
                break;
            };
            let reset_all = gate.class(io.command()) == Class::ResetAll;
            if let Some(io) = self.place(gate, io) {
                out.push(io);
            } else if reset_all {
                // (back at the head: it waits for the zones)
                let io = self.held.pop_back().expect("just held");
                self.held.push_front(io);
                break;
            }
        }
    }
}
