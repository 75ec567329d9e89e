"""Test-only writer of rocprofv3-style `.pftrace` files, built on the structure of rocprofiler-sdk's writer.

No real rocprofv3 pftrace exists here (no AMD GPU), so the tests build them from records, the way
rocprofiler-sdk's source/lib/output/generatePerfetto.cpp lays them out with the Perfetto SDK:
- one named track per thread (API calls), per agent and stream for kernels ("COMPUTE AGENT [n] STREAM [s] (GPU)")
  and for copies ("COPY to AGENT [n] STREAM [s] (GPU)");
- API calls first, then memory copies, then kernels sorted by start per queue, where a dispatch that overlaps the
  next one on its queue is moved to the midpoint of the overlap (the writer's firmware-timestamp workaround);
- each record a SLICE_BEGIN (category, name, debug annotations begin_ns/end_ns/agent/corr_id/...) and SLICE_END;
- the SDK's encoding (`sdk_encoding=True`): interned names, categories and annotation names; a sequence that clears
  its incremental state with trace-packet defaults and a clock snapshot defining clock 64 as incremental; deltas on
  that clock while time goes forward, absolute BOOTTIME timestamps (clock 6) when it goes back. With
  `sdk_encoding=False`: plain strings and absolute timestamps (an older or differently configured SDK).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

BOOTTIME = 6
INCREMENTAL = 64
SEQUENCE = 7


@dataclass
class Record:
    category: str  # kernel_dispatch, memory_copy, hip_api, ...
    name: str
    start: int
    end: int
    agent: int = 4  # logical node id of the GPU
    stream: int = 1
    queue: int = 1
    thread: int = 100
    corr_id: int = 0


@dataclass
class _Writer:
    sdk_encoding: bool
    packets: list = field(default_factory=list)
    interned: dict = field(default_factory=lambda: {"names": {}, "categories": {}, "annotations": {}})
    last_ts: int = 0

    def packet(self):
        packet = pb.TracePacket()
        packet.trusted_packet_sequence_id = SEQUENCE
        self.packets.append(packet)
        return packet

    def start(self, t0: int) -> None:
        packet = self.packet()
        packet.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
        if self.sdk_encoding:
            packet.trace_packet_defaults.timestamp_clock_id = INCREMENTAL
            packet.clock_snapshot.clocks.add(clock_id=BOOTTIME, timestamp=t0)
            packet.clock_snapshot.clocks.add(clock_id=INCREMENTAL, timestamp=t0, is_incremental=True)
            self.last_ts = t0

    def track(self, uuid: int, name: str) -> None:
        desc = self.packet().track_descriptor
        desc.uuid = uuid
        desc.name = name

    def _iid(self, packet, table: str, text: str) -> int:
        ids = self.interned[table]
        if text not in ids:
            ids[text] = len(ids) + 1
            field_name = {"names": "event_names", "categories": "event_categories",
                          "annotations": "debug_annotation_names"}[table]
            getattr(packet.interned_data, field_name).add(iid=ids[text], name=text)
        return ids[text]

    def _stamp(self, packet, ts: int) -> None:
        if not self.sdk_encoding:
            packet.timestamp = ts
            packet.timestamp_clock_id = BOOTTIME
        elif ts >= self.last_ts:
            packet.timestamp = ts - self.last_ts  # on the sequence's default clock: the incremental one
            self.last_ts = ts
        else:
            packet.timestamp = ts
            packet.timestamp_clock_id = BOOTTIME

    def slice(self, track: int, rec: Record, annotations: list[tuple[str, str | int]]) -> None:
        begin = self.packet()
        self._stamp(begin, rec.start)
        event = begin.track_event
        event.type = pb.TrackEvent.TYPE_SLICE_BEGIN
        event.track_uuid = track
        if self.sdk_encoding:
            event.category_iids.append(self._iid(begin, "categories", rec.category))
            event.name_iid = self._iid(begin, "names", rec.name)
        else:
            event.categories.append(rec.category)
            event.name = rec.name
        for key, value in annotations:
            note = event.debug_annotations.add()
            if self.sdk_encoding:
                note.name_iid = self._iid(begin, "annotations", key)
            else:
                note.name = key
            if isinstance(value, str):
                note.string_value = value
            else:
                note.uint_value = int(value)
        end = self.packet()
        self._stamp(end, rec.end)
        end.track_event.type = pb.TrackEvent.TYPE_SLICE_END
        end.track_event.track_uuid = track


def _adjust_overlaps(kernels: list[Record]) -> list[Record]:
    """The writer's workaround: per agent and queue, sorted by start, an overlap moves both ends to its midpoint."""
    out = []
    groups: dict[tuple[int, int], list[Record]] = {}
    for rec in kernels:
        groups.setdefault((rec.agent, rec.queue), []).append(Record(**vars(rec)))
    for recs in groups.values():
        recs.sort(key=lambda r: r.start)
        for cur, nxt in zip(recs, recs[1:], strict=False):
            if nxt.start < cur.end:
                mid = nxt.start + (min(cur.end, nxt.end) - nxt.start) // 2
                cur.end = nxt.start = mid
        out.extend(recs)
    return out


def write_pftrace(path: Path, records: list[Record], *, sdk_encoding: bool = True) -> Path:
    """Write records the way rocprofv3 lays out a results.pftrace; returns the path."""
    writer = _Writer(sdk_encoding)
    writer.start(min(r.start for r in records) if records else 0)
    api = [r for r in records if r.category not in ("kernel_dispatch", "memory_copy")]
    copies = [r for r in records if r.category == "memory_copy"]
    kernels = _adjust_overlaps([r for r in records if r.category == "kernel_dispatch"])
    tracks: dict[str, int] = {}

    def track(name: str) -> int:
        if name not in tracks:
            tracks[name] = 1000 + len(tracks)
            writer.track(tracks[name], name)
        return tracks[name]

    for rec in api:
        writer.slice(track(f"THREAD {rec.thread}"), rec,
                     [("begin_ns", rec.start), ("end_ns", rec.end), ("tid", rec.thread), ("corr_id", rec.corr_id)])
    for rec in copies:
        writer.slice(track(f"COPY to AGENT [{rec.agent}] STREAM [{rec.stream}] (GPU)"), rec,
                     [("begin_ns", rec.start), ("end_ns", rec.end), ("dst_agent", f"GPU-{rec.agent}"),
                      ("corr_id", rec.corr_id)])
    for rec in kernels:
        writer.slice(track(f"COMPUTE AGENT [{rec.agent}] STREAM [{rec.stream}] (GPU)"), rec,
                     [("begin_ns", rec.start), ("end_ns", rec.end), ("agent", f"GPU-{rec.agent}"),
                      ("corr_id", rec.corr_id), ("queue", rec.queue)])
    trace = pb.Trace()
    trace.packet.extend(writer.packets)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(trace.SerializeToString())
    return path
