//! Writing files into zones: choosing a zone by lifetime within the limits, finishing, resetting dead zones,
//! and garbage collection.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use zonelab_runtime::{CommandQueue, HostExt, IoData};
use zonelab_zns::{ReportFilter, ZoneSendAction, ZoneState};

use super::{lifetime_fit, read_blocks, Choice, Purpose, Result, Role, State, ZoneUse, ZonedFs, ZonedFsError};
use crate::journal::{Extent, Record};

impl<Q: CommandQueue + Clone + 'static> ZonedFs<Q> {
    /// Writes a file's buffer: whole blocks only, or everything with the last block padded (`pad`).
    pub(super) async fn write_buffer(&self, id: u64, pad: bool) -> Result<()> {
        let block = self.inner.block_bytes;
        let Some(flushing) = self.inner.state.borrow().files.get(&id).map(|node| Rc::clone(&node.flushing)) else {
            return Err(ZonedFsError::NotWritable(id));
        };
        let _in_order = flushing.lock().await;
        loop {
            let (data, lifetime, preferred) = {
                let state = self.inner.state.borrow();
                let Some(node) = state.files.get(&id) else { return Ok(()) };
                let take = if pad { node.buffer.len() as u64 } else { node.buffer.len() as u64 / block * block };
                if take == 0 {
                    return Ok(());
                }
                (node.buffer[..take as usize].to_vec(), node.record.lifetime, node.last_zone)
            };
            let zone = self.acquire(lifetime, preferred, Purpose::Write).await?;
            let written = self.write_into(zone, &data).await;
            let bytes = match written {
                Ok(bytes) => bytes,
                Err(error) => {
                    self.release(zone);
                    return Err(error);
                }
            };
            let (lba, blocks) = bytes;
            let len_bytes = (blocks * block).min(data.len() as u64);
            {
                let mut state = self.inner.state.borrow_mut();
                state.stats.bytes_written += len_bytes;
                state.stats.padding_bytes += blocks * block - len_bytes;
                let zone_use = &mut state.zones[zone as usize];
                zone_use.live_lba += blocks;
                let node = state.files.get_mut(&id).expect("a file being written is not dropped");
                node.buffer.drain(..len_bytes as usize);
                node.last_zone = Some(zone);
                let extents = &mut node.record.extents;
                match extents.last_mut() {
                    Some(last)
                        if last.len_bytes % block == 0
                            && last.lba + last.len_bytes / block == lba
                            && self.inner.geometry.zone_of(last.lba) == zone =>
                    {
                        last.len_bytes += len_bytes;
                        node.journaled = node.journaled.min(extents.len() - 1);
                    }
                    _ => extents.push(Extent { lba, len_bytes }),
                }
            }
            self.finish_if_nearly_full(zone).await?;
            self.release(zone);
        }
    }

    /// Writes as much of `data` as fits at the write pointer of the held `zone`, the last block padded;
    /// returns the first LBA and the blocks written.
    pub(super) async fn write_into(&self, zone: u32, data: &[u8]) -> Result<(u64, u64)> {
        let block = self.inner.block_bytes;
        let geometry = self.inner.geometry;
        let written = self.inner.state.borrow().zones[zone as usize].written_lba;
        let blocks = (geometry.zone_cap_lba - written).min((data.len() as u64).div_ceil(block));
        let first = geometry.zone_start_lba(zone) + written;
        let mut bytes = data[..(blocks * block).min(data.len() as u64) as usize].to_vec();
        bytes.resize((blocks * block) as usize, 0);
        let step = geometry.max_transfer_lba.unwrap_or(blocks).max(1);
        let mut done = 0;
        while done < blocks {
            let count = step.min(blocks - done);
            let chunk = bytes[(done * block) as usize..((done + count) * block) as usize].to_vec();
            let result = self.inner.queue.write(first + done, IoData::Bytes(chunk)).await;
            if let Err(status) = result {
                // Whatever part of the command landed, the zone's write pointer says where the next write goes.
                self.refresh_zone(zone).await;
                return Err(status.into());
            }
            done += count;
            let mut state = self.inner.state.borrow_mut();
            let zone_use = &mut state.zones[zone as usize];
            zone_use.written_lba += count;
            zone_use.full = zone_use.written_lba >= geometry.zone_cap_lba;
        }
        Ok((first, blocks))
    }

    pub(super) async fn refresh_zone(&self, zone: u32) {
        let geometry = self.inner.geometry;
        if let Ok(report) = self.inner.queue.report_zones(geometry.zone_start_lba(zone), ReportFilter::All, 1).await {
            if let Some(descriptor) = report.zones.first() {
                let mut state = self.inner.state.borrow_mut();
                let zone_use = &mut state.zones[zone as usize];
                zone_use.written_lba = match descriptor.state {
                    ZoneState::Empty => 0,
                    ZoneState::Full | ZoneState::ReadOnly | ZoneState::Offline => geometry.zone_cap_lba,
                    _ => descriptor.wp_lba - descriptor.start_lba,
                };
                zone_use.full = zone_use.written_lba >= geometry.zone_cap_lba;
            }
        }
    }

    pub(super) async fn finish_if_nearly_full(&self, zone: u32) -> Result<()> {
        let threshold = self.inner.options.finish_threshold_pct;
        let cap = self.inner.geometry.zone_cap_lba;
        let finish = {
            let state = self.inner.state.borrow();
            let zone_use = &state.zones[zone as usize];
            threshold > 0 && !zone_use.full && (cap - zone_use.written_lba) * 100 < cap * u64::from(threshold)
        };
        if finish {
            self.finish_zone(zone).await?;
        }
        Ok(())
    }

    pub(super) async fn finish_zone(&self, zone: u32) -> Result<()> {
        self.inner.queue.zone_send(self.inner.geometry.zone_start_lba(zone), ZoneSendAction::Finish, false).await?;
        let mut state = self.inner.state.borrow_mut();
        state.zones[zone as usize].full = true;
        state.stats.zone_finishes += 1;
        Ok(())
    }

    pub(super) fn release(&self, zone: u32) {
        self.inner.state.borrow_mut().zones[zone as usize].held = false;
        self.inner.zones_changed.notify_waiters();
    }

    /// Takes a data zone to write a file of `lifetime` into, waiting, finishing or collecting as needed.
    pub(super) async fn acquire(&self, lifetime: u8, preferred: Option<u32>, purpose: Purpose) -> Result<u32> {
        loop {
            let changed = self.inner.zones_changed.notified();
            let choice = self.choose(lifetime, preferred, purpose);
            match choice {
                Choice::Take(zone) => {
                    self.inner.state.borrow_mut().zones[zone as usize].held = true;
                    return Ok(zone);
                }
                Choice::Open(zone) => {
                    let mut state = self.inner.state.borrow_mut();
                    let zone_use = &mut state.zones[zone as usize];
                    zone_use.held = true;
                    zone_use.lifetime = lifetime;
                    return Ok(zone);
                }
                Choice::FinishThenRetry(zone) => {
                    self.inner.state.borrow_mut().zones[zone as usize].held = true;
                    let finished = self.finish_zone(zone).await;
                    self.release(zone);
                    finished?;
                }
                Choice::Collect => {
                    // Boxed: collecting acquires zones itself, so the futures would otherwise contain each other.
                    let collected: std::pin::Pin<Box<dyn std::future::Future<Output = Result<bool>> + '_>> =
                        Box::pin(self.collect());
                    if !collected.await? && purpose != Purpose::Wal {
                        // Nothing to collect after all (someone else did): take what is left, or wait.
                        match self.choose_without_collect(lifetime) {
                            Some(zone) => {
                                self.inner.state.borrow_mut().zones[zone as usize].held = true;
                                return Ok(zone);
                            }
                            None => changed.await,
                        }
                    }
                }
                Choice::Wait => changed.await,
                Choice::NoSpace => return Err(ZonedFsError::NoSpace),
            }
        }
    }

    pub(super) fn choose(&self, lifetime: u8, preferred: Option<u32>, purpose: Purpose) -> Choice {
        let cap = self.inner.geometry.zone_cap_lba;
        let for_gc = purpose == Purpose::Collect;
        let state = self.inner.state.borrow();
        let active = active_zones(&state);
        let data =
            || state.zones.iter().enumerate().filter(|(_, zone)| zone.role == Role::Data && zone.wal_of.is_none());
        let held = data().filter(|(_, zone)| zone.held).count() as u32;
        if held >= self.inner.open_limit {
            return Choice::Wait;
        }
        let open_ready: Vec<(usize, &ZoneUse)> =
            data().filter(|(_, zone)| zone.written_lba > 0 && !zone.full && !zone.held).collect();
        let empty: Vec<usize> =
            data().filter(|(_, zone)| zone.written_lba == 0 && !zone.held).map(|(index, _)| index).collect();
        let reserve = self.inner.options.gc_reserve_zones as usize;
        let room_for_active = active < self.inner.active_limit;
        let room_to_move = !empty.is_empty() || !open_ready.is_empty();
        if purpose == Purpose::Wal {
            // An empty zone of the log's own, the reserve included (a log takes one zone at a time, and the
            // database stops without it): else one that collecting empties, or room to activate one made by
            // finishing the open zone with the least room left.
            return if room_for_active && !empty.is_empty() {
                Choice::Open(empty[0] as u32)
            } else if empty.is_empty() && room_to_move && self.victim(&state).is_some() {
                Choice::Collect
            } else if let (false, Some((zone, _))) =
                (room_for_active, open_ready.iter().min_by_key(|(index, zone)| (cap - zone.written_lba, *index)))
            {
                Choice::FinishThenRetry(*zone as u32)
            } else if held > 0 || !room_for_active {
                Choice::Wait
            } else {
                Choice::NoSpace
            };
        }
        if let Some(zone) = preferred {
            let zone_use = &state.zones[zone as usize];
            if !zone_use.held
                && !zone_use.full
                && zone_use.written_lba > 0
                && lifetime_fit(zone_use.lifetime, lifetime).is_some()
            {
                return Choice::Take(zone);
            }
        }
        let best_fit = open_ready
            .iter()
            .filter_map(|(index, zone)| lifetime_fit(zone.lifetime, lifetime).map(|fit| (*index, fit)))
            .min_by_key(|(index, fit)| (*fit, *index));
        if let Some((zone, 0)) = best_fit {
            return Choice::Take(zone as u32);
        }
        // A zone of this lifetime of its own, while the active limit allows, rather than a longer-lived one.
        if room_for_active && (empty.len() > reserve || (for_gc && !empty.is_empty())) {
            return Choice::Open(empty[0] as u32);
        }
        if let Some((zone, _)) = best_fit {
            return Choice::Take(zone as u32);
        }
        if !for_gc && empty.len() <= reserve && room_to_move && self.victim(&state).is_some() {
            return Choice::Collect;
        }
        if !room_for_active && empty.len() > reserve {
            // ZenFS's FinishCheapestIOZone: give up the little room left in one zone for a zone of this lifetime.
            if let Some((zone, _)) = open_ready.iter().min_by_key(|(index, zone)| (cap - zone.written_lba, *index)) {
                return Choice::FinishThenRetry(*zone as u32);
            }
        }
        match last_resort(lifetime, room_for_active, &empty, &open_ready) {
            Some(zone) => Choice::Take(zone),
            // Garbage collection holds its victim: only other holders will release anything.
            None if held > u32::from(for_gc) => Choice::Wait,
            None => Choice::NoSpace,
        }
    }

    pub(super) fn choose_without_collect(&self, lifetime: u8) -> Option<u32> {
        let state = self.inner.state.borrow();
        let active = active_zones(&state);
        let data =
            || state.zones.iter().enumerate().filter(|(_, zone)| zone.role == Role::Data && zone.wal_of.is_none());
        let open_ready: Vec<(usize, &ZoneUse)> =
            data().filter(|(_, zone)| zone.written_lba > 0 && !zone.full && !zone.held).collect();
        let empty: Vec<usize> =
            data().filter(|(_, zone)| zone.written_lba == 0 && !zone.held).map(|(index, _)| index).collect();
        last_resort(lifetime, active < self.inner.active_limit, &empty, &open_ready)
    }

    /// The full data zone with the least live data, if it holds any dead data.
    pub(super) fn victim(&self, state: &State) -> Option<u32> {
        let cap = self.inner.geometry.zone_cap_lba;
        state
            .zones
            .iter()
            .enumerate()
            .filter(|(_, zone)| {
                zone.role == Role::Data && zone.wal_of.is_none() && zone.full && !zone.held && zone.live_lba < cap
            })
            .min_by_key(|(index, zone)| (zone.live_lba, *index))
            .map(|(index, _)| index as u32)
    }

    /// Garbage collection: moves the live extents of the emptiest full zone to other zones, journals their
    /// new places and resets it. Returns whether a zone was reclaimed.
    pub(super) async fn collect(&self) -> Result<bool> {
        let _one_at_a_time = self.inner.gc_lock.lock().await;
        let victim = {
            let mut state = self.inner.state.borrow_mut();
            let Some(victim) = self.victim(&state) else { return Ok(false) };
            state.zones[victim as usize].held = true;
            victim
        };
        let name = || format!("GC of zone {victim}");
        let reclaim = async {
            match self.move_live_extents(victim).await {
                Ok(()) => self.reset_held(victim).await.map(|()| true),
                Err(error) => {
                    self.release(victim);
                    Err(error)
                }
            }
        };
        self.traced("zonedfs GC", name, reclaim).await
    }

    /// Copies the live extents of the held `victim` elsewhere and journals their new places.
    pub(super) async fn move_live_extents(&self, victim: u32) -> Result<()> {
        let geometry = self.inner.geometry;
        let block = self.inner.block_bytes;
        let moves = {
            let state = self.inner.state.borrow();
            let moves = state
                .files
                .iter()
                .flat_map(|(id, node)| {
                    node.record
                        .extents
                        .iter()
                        .filter(|extent| geometry.zone_of(extent.lba) == victim)
                        .map(move |extent| (*id, *extent, node.record.lifetime))
                })
                .collect::<Vec<(u64, Extent, u8)>>();
            moves
        };
        let mut touched = BTreeSet::new();
        let mut moved_bytes = 0;
        for (id, extent, lifetime) in moves {
            let blocks = extent.len_bytes.div_ceil(block);
            let data = read_blocks(&self.inner.queue, extent.lba, blocks).await?;
            let mut data = &data[..extent.len_bytes as usize];
            let mut placed = Vec::new();
            while !data.is_empty() {
                let zone = self.acquire(lifetime, None, Purpose::Collect).await?;
                let written = self.write_into(zone, data).await;
                let (lba, count) = match written {
                    Ok(written) => written,
                    Err(error) => {
                        self.release(zone);
                        return Err(error);
                    }
                };
                let len_bytes = (count * block).min(data.len() as u64);
                self.inner.state.borrow_mut().zones[zone as usize].live_lba += count;
                self.release(zone);
                placed.push(Extent { lba, len_bytes });
                data = &data[len_bytes as usize..];
            }
            let mut state = self.inner.state.borrow_mut();
            let still_there = state.files.get_mut(&id).and_then(|node| {
                let at = node.record.extents.iter().position(|known| *known == extent)?;
                node.record.extents.splice(at..=at, placed.iter().copied());
                node.journaled = node.journaled.min(at);
                Some(())
            });
            match still_there {
                Some(()) => {
                    state.zones[victim as usize].live_lba -= blocks;
                    touched.insert(id);
                    moved_bytes += extent.len_bytes;
                }
                // Deleted while it was being moved: the copy is dead too.
                None => {
                    for copy in &placed {
                        state.zones[geometry.zone_of(copy.lba) as usize].live_lba -= copy.len_bytes.div_ceil(block);
                    }
                }
            }
        }
        let records: Vec<Record> = {
            let mut state = self.inner.state.borrow_mut();
            let now = self.now_s();
            touched
                .iter()
                .filter_map(|id| {
                    let node = state.files.get_mut(id)?;
                    node.journaled = node.record.extents.len();
                    Some(Record::Extents {
                        id: *id,
                        from: 0,
                        extents: node.record.extents.clone(),
                        mtime_s: now,
                        lifetime: node.record.lifetime,
                    })
                })
                .collect()
        };
        self.commit(records).await?;
        let mut state = self.inner.state.borrow_mut();
        state.stats.gc_runs += 1;
        state.stats.gc_bytes_moved += moved_bytes;
        Ok(())
    }

    /// Resets data zones that hold nothing live (after a durable record made them dead).
    pub(super) async fn reclaim(&self, zones: Vec<u32>) -> Result<()> {
        self.retire_wals().await;
        for zone in zones {
            let take = {
                let mut state = self.inner.state.borrow_mut();
                let zone_use = &mut state.zones[zone as usize];
                let dead = zone_use.role == Role::Data
                    && zone_use.wal_of.is_none()
                    && zone_use.live_lba == 0
                    && zone_use.written_lba > 0;
                if dead && !zone_use.held {
                    zone_use.held = true;
                }
                dead && zone_use.held
            };
            if take {
                self.reset_held(zone).await?;
            }
        }
        Ok(())
    }

    /// Waits for the held zone's readers to finish, resets it and releases it empty.
    pub(super) async fn reset_held(&self, zone: u32) -> Result<()> {
        loop {
            let changed = self.inner.zones_changed.notified();
            if self.inner.state.borrow().zones[zone as usize].readers == 0 {
                break;
            }
            changed.await;
        }
        self.inner.reset_generation.fetch_add(1, Ordering::AcqRel);
        let reset =
            self.inner.queue.zone_send(self.inner.geometry.zone_start_lba(zone), ZoneSendAction::Reset, false).await;
        {
            let mut state = self.inner.state.borrow_mut();
            if reset.is_ok() {
                let zone_use = &mut state.zones[zone as usize];
                zone_use.written_lba = 0;
                zone_use.full = false;
                zone_use.lifetime = 0;
                state.stats.zone_resets += 1;
            }
        }
        self.release(zone);
        reset.map_err(ZonedFsError::from)
    }
}

/// The last resort: any open zone with room (lifetimes mixed), else an empty zone from the reserve.
pub(super) fn last_resort(
    lifetime: u8,
    room_for_active: bool,
    empty: &[usize],
    open_ready: &[(usize, &ZoneUse)],
) -> Option<u32> {
    if let Some((zone, _)) = open_ready.iter().min_by_key(|(index, zone)| (zone.lifetime.abs_diff(lifetime), *index)) {
        return Some(*zone as u32);
    }
    (room_for_active && !empty.is_empty()).then(|| empty[0] as u32)
}

/// Data zones holding one of the device's active resources.
fn active_zones(state: &State) -> u32 {
    state.zones.iter().filter(|zone| zone.role == Role::Data && zone.is_active()).count() as u32
}
