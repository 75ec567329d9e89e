"""rocprofv3 `--output-format pftrace` (`<pid>_results.pftrace`): a Perfetto protobuf trace of track events.

rocprofiler-sdk writes it with the Perfetto SDK (source/lib/output/generatePerfetto.cpp): one slice per kernel
dispatch (category `kernel_dispatch`, on a track per agent and stream or queue), per memory copy (`memory_copy`,
on a "COPY to AGENT" track) and per API call (`hip_api`, `hsa_api`, `marker_api`, `rccl_api`, ... on thread
tracks), each as a SLICE_BEGIN/SLICE_END pair with the raw times also in debug annotations (`begin_ns`,
`end_ns`, `agent`, `corr_id`, ...). Where two dispatches on one queue overlap, the writer moves both to the
midpoint of the overlap before writing them (a firmware-timestamp workaround), so such kernels can differ from
the same run's kernel_trace.csv by that adjustment.

Packets are decoded one at a time with the Perfetto protos that Google publishes in the `perfetto` package
(`perfetto_trace_pb2`, no trace processor and nothing fetched), so memory stays bounded by one packet. The
state the format keeps per packet sequence is honoured: interned names and categories, trace-packet defaults
(default track, default clock) and incremental clocks, reset when a packet clears the incremental state.
Timestamps stay in the clock the writer used (rocprofiler's, like the CSV files); an incremental clock is
resolved into the clock its snapshot names.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import dispatches
from madengine_rocprof.reports.model import TimingSource

KERNEL_CATEGORY = "kernel_dispatch"
COPY_CATEGORY = "memory_copy"
_SEQ_INCREMENTAL_STATE_CLEARED = 1  # TracePacket.SequenceFlags
_TRACE_PACKET_FIELD = 1  # Trace.packet
_BUILTIN_CLOCK_BOOTTIME = 6  # the Perfetto SDK's default trace clock on Linux
_INCREMENTAL_CLOCK_DEFAULT = 64  # the SDK's sequence-scoped incremental clock when no snapshot defines it
_AGENT_ANNOTATION = {KERNEL_CATEGORY: "agent", COPY_CATEGORY: "dst_agent"}
_TRACK_AGENT = re.compile(r"\bAGENT \[(\d+)\]")  # "COMPUTE AGENT [2] STREAM [1] (GPU)", "COPY to AGENT [2] ..."
_FIX = "the file is truncated or corrupt; re-run rocprofv3 with --output-format pftrace"


def _protos():
    """The Perfetto trace protos (imported on first use: reading CSV runs never pays for them)."""
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError as err:  # a runtime dependency; missing only in a broken install
        raise UserError(
            f"reading .pftrace files needs the `perfetto` package ({err})",
            fix="pip install -r requirements.txt (or `pip install perfetto protobuf`)",
        ) from None
    return perfetto_trace_pb2


@dataclass
class Slice:
    category: str
    name: str
    track: str  # the track's name (or its uuid when it has none)
    start: int
    end: int
    agent: str | None  # the `agent` (kernels) or `dst_agent` (copies) debug annotation


@dataclass
class _Sequence:
    """What one packet sequence carries from packet to packet (reset when it clears its incremental state)."""

    names: dict[int, str] = field(default_factory=dict)
    categories: dict[int, str] = field(default_factory=dict)
    annotation_names: dict[int, str] = field(default_factory=dict)
    default_clock: int | None = None
    default_track: int | None = None
    # incremental clock id -> [last value, unit in ns, offset into the snapshot's reference clock]
    incremental: dict[int, list[int]] = field(default_factory=dict)

    def clear(self) -> None:
        self.names.clear()
        self.categories.clear()
        self.annotation_names.clear()
        self.incremental.clear()


def _packets(path: Path) -> Iterator[tuple[int, bytes]]:
    """(byte offset, TracePacket bytes) of every packet: the file is a `Trace`, i.e. repeated field 1."""
    inputs.check_regular(path, "Perfetto trace")  # a FIFO or device would hang the open or never end
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            if size == 0:  # as an empty CSV: rocprofv3 writes no file at all when nothing was captured
                raise UserError("empty file: no Perfetto trace packets", file=str(path),
                                fix="the profiler was interrupted while writing; re-run it (rocprofv3 writes no "
                                    "file at all when nothing was captured)")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                pos = 0
                while pos < size:
                    start = pos
                    tag, pos = _varint(data, pos, size, path, start)
                    wire = tag & 7
                    if wire == 2:
                        length, pos = _varint(data, pos, size, path, start)
                        if pos + length > size:
                            raise UserError(f"the trace ends inside a packet ({length} bytes announced at byte "
                                            f"{start}, {size - pos} left)", file=str(path), fix=_FIX)
                        if tag >> 3 == _TRACE_PACKET_FIELD:
                            yield start, data[pos : pos + length]
                        pos += length
                    elif wire == 0:
                        _, pos = _varint(data, pos, size, path, start)
                    elif wire in (1, 5):
                        pos += 8 if wire == 1 else 4
                    else:
                        raise UserError(f"not a Perfetto trace: bad protobuf field at byte {start}",
                                        file=str(path), fix=_FIX)
                if pos > size:
                    raise UserError("the trace ends inside a field", file=str(path), fix=_FIX)
    except OSError as err:
        raise UserError(f"cannot read: {err.strerror}", file=str(path)) from None


def _varint(data, pos: int, size: int, path: Path, start: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= size or shift > 63:
            raise UserError(f"not a Perfetto trace: broken varint at byte {start}", file=str(path), fix=_FIX)
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _timestamp(packet, seq: _Sequence) -> int:
    clock = packet.timestamp_clock_id if packet.HasField("timestamp_clock_id") else seq.default_clock
    state = seq.incremental.get(clock) if clock is not None else None
    if state is None and clock == _INCREMENTAL_CLOCK_DEFAULT:
        raise ValueError("a timestamp on the incremental clock before any clock snapshot defined it")
    if state is None:
        return packet.timestamp
    state[0] += packet.timestamp * state[1]
    return state[0] + state[2]


def _clock_snapshot(snapshot, seq: _Sequence) -> None:
    reference = next((c for c in snapshot.clocks if not c.is_incremental), None)
    for clock in snapshot.clocks:
        if clock.is_incremental:
            unit = clock.unit_multiplier_ns or 1
            offset = (reference.timestamp - clock.timestamp * unit) if reference is not None else 0
            seq.incremental[clock.clock_id] = [clock.timestamp * unit, unit, offset]


def _text(value, path: Path, where: str) -> str:
    """A protobuf string field: some protobuf builds hand over a field that is not UTF-8 as bytes."""
    if isinstance(value, bytes):
        raise UserError("a name in the trace is not UTF-8 text", file=str(path), where=where, fix=_FIX)
    return value


def _annotation(event, seq: _Sequence, wanted: str) -> str | None:
    for note in event.debug_annotations:
        name = note.name if note.HasField("name") else seq.annotation_names.get(note.name_iid, "")
        if isinstance(name, bytes):
            return None  # not UTF-8: not the annotation wanted
        if name == wanted:
            kind = note.WhichOneof("value")
            return str(getattr(note, kind)) if kind else None
    return None


def read_slices(path: Path, categories: tuple[str, ...] = (KERNEL_CATEGORY, COPY_CATEGORY)) -> Iterator[Slice]:
    """Every complete slice of the given categories, in the order the slices end."""
    pb = _protos()
    packet = pb.TracePacket()
    sequences: dict[int, _Sequence] = {}
    track_names: dict[int, str] = {}
    open_slices: dict[int, list] = {}  # track uuid -> stack of [category, name, start, agent]
    for index, (offset, raw) in enumerate(_packets(path)):
        where = f"packet {index} (byte {offset})"
        try:
            packet.ParseFromString(raw)
        except Exception as err:  # protobuf's DecodeError; the message is all a user can act on
            raise UserError(f"not a Perfetto trace packet: {err}", file=str(path), where=where, fix=_FIX) from None
        seq = sequences.setdefault(packet.trusted_packet_sequence_id, _Sequence())
        if packet.incremental_state_cleared or packet.sequence_flags & _SEQ_INCREMENTAL_STATE_CLEARED:
            seq.clear()
        if packet.HasField("trace_packet_defaults"):
            defaults = packet.trace_packet_defaults
            if defaults.HasField("timestamp_clock_id"):
                seq.default_clock = defaults.timestamp_clock_id
            if defaults.track_event_defaults.HasField("track_uuid"):
                seq.default_track = defaults.track_event_defaults.track_uuid
        if packet.HasField("interned_data"):
            interned = packet.interned_data
            seq.names.update((e.iid, _text(e.name, path, where)) for e in interned.event_names)
            seq.categories.update((e.iid, _text(e.name, path, where)) for e in interned.event_categories)
            seq.annotation_names.update((e.iid, _text(e.name, path, where)) for e in interned.debug_annotation_names)
        if packet.HasField("clock_snapshot"):
            _clock_snapshot(packet.clock_snapshot, seq)
        if packet.HasField("track_descriptor"):
            desc = packet.track_descriptor
            track_names[desc.uuid] = _text(desc.name or desc.static_name or str(desc.uuid), path, where)
        if not packet.HasField("track_event"):
            continue
        event = packet.track_event
        try:
            ts = _timestamp(packet, seq)
        except ValueError as err:
            raise UserError(str(err), file=str(path), where=where, fix=_FIX) from None
        track = event.track_uuid if event.HasField("track_uuid") else seq.default_track
        if track is None:
            raise UserError("a track event on no track", file=str(path), where=where, fix=_FIX)
        kind = event.type
        if kind == pb.TrackEvent.TYPE_SLICE_BEGIN:
            category = _text(seq.categories.get(event.category_iids[0], "") if event.category_iids
                             else (event.categories[0] if event.categories else ""), path, where)
            name = _text(event.name, path, where) if event.HasField("name") else seq.names.get(event.name_iid)
            if name is None:
                raise UserError(f"event name id {event.name_iid} was never interned", file=str(path),
                                where=where, fix=_FIX)
            agent = _annotation(event, seq, _AGENT_ANNOTATION[category]) if category in _AGENT_ANNOTATION else None
            open_slices.setdefault(track, []).append([category, name, ts, agent])
        elif kind == pb.TrackEvent.TYPE_SLICE_END:
            stack = open_slices.get(track)
            if not stack:
                raise UserError(f"a slice ends on track {track_names.get(track, track)} where none began",
                                file=str(path), where=where, fix=_FIX)
            category, name, start, agent = stack.pop()
            if ts < start:
                raise UserError(f"slice `{name}` ends ({ts}) before it begins ({start})", file=str(path),
                                where=where, fix=_FIX)
            if category in categories:
                yield Slice(category, name, track_names.get(track, str(track)), start, ts, agent)
    unfinished = sum(len(stack) for stack in open_slices.values())
    if unfinished:
        raise UserError(f"{unfinished} slice(s) never ended: the trace was cut off", file=str(path), fix=_FIX)


def _device(item: Slice) -> str:
    """One name per GPU for kernels and the copies into it: the agent number in the writer's track names
    (stream grouping, the default), else the agent annotation (queue grouping), else the track."""
    match = _TRACK_AGENT.search(item.track)
    return f"agent {match.group(1)}" if match else (item.agent or item.track)


def read_pftrace(src: TimingSource) -> TimingSource:
    kernels: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
    copies: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
    for item in read_slices(src.path):
        rows = kernels if item.category == KERNEL_CATEGORY else copies
        rows["name"].append(item.name)
        rows["start"].append(item.start)
        rows["end"].append(item.end)
        rows["device"].append(_device(item))
    copy_table = dispatches.frame(copies) if copies["name"] else None
    return dispatches.aggregate(src, dispatches.frame(kernels), copies=copy_table)


def iter_pftrace(path: Path) -> Iterator[tuple[str, int, int, str]]:
    """Per-dispatch (name, start, end, track), like the other timeline readers."""
    for item in read_slices(path, (KERNEL_CATEGORY,)):
        yield item.name, item.start, item.end, item.track
