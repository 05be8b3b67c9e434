"""Run-directory outputs: scalar metrics (JSON lines + TensorBoard) and the log file.

Layout inside a run directory::

    run_dir/
      metrics.jsonl   one JSON object per :meth:`MetricsWriter.write` call
      metrics.rewound.jsonl  records set aside by :meth:`MetricsWriter.rewind` (a restore)
      tb/             TensorBoard event files (tensorboardX), one per writer opened
      train.log       the ``moozi`` logger (:func:`setup_logging`)

A ``metrics.jsonl`` line is flat: ``{"step": 120, "wall_time": 1712345678.25,
"loss/policy": 0.51, "train/step": 120, ...}``. ``step`` (int) and ``wall_time``
(Unix seconds, float) are reserved; metric keys are namespaced with ``/``
(``loss/policy``, ``test/return_mean``). Integers (including numpy/JAX integer
scalars) stay integers, bools become 0/1, everything else becomes a float.
Non-finite floats are written as the strings ``"NaN"``, ``"Infinity"`` and
``"-Infinity"`` so every line is strict JSON; :func:`read_metrics` turns them
back into floats.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import math
import os
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

METRICS_FILE = "metrics.jsonl"
REWOUND_FILE = "metrics.rewound.jsonl"
TB_DIR = "tb"
LOG_FILE = "train.log"
LOG_MAX_BYTES = 64 * 1024 * 1024  # train.log rolls over to train.log.1 at this size
LOG_KEEP = 3  # rolled-over train.log files kept (the oldest beyond them is deleted)
RESERVED_KEYS = ("step", "wall_time")

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_log = logging.getLogger("moozi.observe")


def _scalar(key: str, value: Any) -> int | float:
    """A Python int/float for one metric value, or ValueError naming the key."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value
    try:
        arr = np.asarray(value)
    except Exception as e:  # noqa: BLE001 - report any conversion failure uniformly
        raise ValueError(f"metric {key!r}: cannot convert {type(value).__qualname__} to a number ({e})") from e
    if arr.size != 1:
        raise ValueError(
            f"metric {key!r} has shape {arr.shape}; write() takes scalars "
            "(use write_histogram for arrays)"
        )
    if arr.dtype.kind == "b":
        return int(arr.reshape(()).item())
    if arr.dtype.kind in "iu":
        return int(arr.reshape(()).item())
    if arr.dtype.kind == "f" or arr.dtype.name == "bfloat16":
        return float(arr.reshape(()).astype(np.float64).item())
    raise ValueError(f"metric {key!r} has dtype {arr.dtype}; write() takes real numbers")


def _json_value(x: int | float) -> int | float | str:
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    return x


class _Events:
    """TensorBoard event files written in the caller's thread, from tensorboardX's summaries and event file.

    tensorboardX's ``SummaryWriter`` writes from a background thread: an ``OSError`` there (a full or read-only
    disk) ends the thread with a traceback on stderr, its queue fills, and the next write (or ``close``) blocks
    the run forever. Here a failed write raises where it happens, naming the file, and nothing waits on a
    thread. Events are the same as ``SummaryWriter``'s (its default histogram bins; ``purge_step`` as a
    ``SessionLog.START`` at that step, so TensorBoard drops the older events from it on)."""

    def __init__(self, folder: Path, purge_step: int | None, suffix: str):
        from tensorboardX.event_file_writer import EventsWriter

        folder.mkdir(parents=True, exist_ok=True)
        self._writer = self._guard(lambda: EventsWriter(str(folder / "events"), filename_suffix=suffix), folder)
        self.path = Path(getattr(self._writer, "_file_name", folder))
        if purge_step is not None:
            from tensorboardX.proto.event_pb2 import Event, SessionLog

            self._write(Event(step=int(purge_step), wall_time=time.time(),
                              session_log=SessionLog(status=SessionLog.START)))

    @staticmethod
    def _guard(call, path):
        try:
            return call()
        except OSError as e:
            raise OSError(e.errno, e.strerror, str(path)) from e

    def _write(self, event) -> None:
        self._guard(lambda: self._writer.write_event(event), self.path)

    def summary(self, summary, step: int) -> None:
        from tensorboardX.proto.event_pb2 import Event

        self._write(Event(summary=summary, step=int(step), wall_time=time.time()))

    def scalar(self, key: str, value: float, step: int) -> None:
        from tensorboardX.summary import scalar

        self.summary(scalar(key, value), step)

    def histogram(self, key: str, values: np.ndarray, step: int) -> None:
        from tensorboardX.summary import histogram

        self.summary(histogram(key, values, _tensorflow_bins()), step)

    def flush(self) -> None:
        self._guard(self._writer.flush, self.path)

    def close(self) -> None:
        self._guard(self._writer.close, self.path)


def _tensorflow_bins() -> list[float]:
    """The histogram bins of TensorBoard's ``'tensorflow'`` default (what ``SummaryWriter.add_histogram`` uses)."""
    v, buckets = 1e-12, []
    while v < 1e20:
        buckets.append(v)
        v *= 1.1
    return [-b for b in reversed(buckets)] + [0.0] + buckets


class MetricsWriter:
    """Appends scalar metrics to ``run_dir/metrics.jsonl`` and TensorBoard (``run_dir/tb``).

    Opening an existing run appends to its ``metrics.jsonl`` (a resume continues
    the same file); a partial last line left by a killed process is removed
    first so the file stays valid JSON lines. With ``tensorboard=True`` the
    optional ``tensorboardX`` package is used; if it is not installed a warning
    is logged and only the JSON lines are written.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, run_dir: str | os.PathLike, tensorboard: bool = True, rewind_to: int | None = None):
        """Open (create) ``run_dir`` for appending metrics (``rewind_to``: see :meth:`rewind`)."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / METRICS_FILE
        self._tensorboard = tensorboard
        self._file = None
        self._tb = None
        self._open(rewind_to)

    def _open(self, rewind_to: int | None) -> None:
        _drop_partial_last_line(self.path)
        if rewind_to is not None:
            _cut_after(self.path, int(rewind_to), self.run_dir / REWOUND_FILE)
        self._file = open(self.path, "a", encoding="utf-8")
        if self._tensorboard:
            try:
                import tensorboardX  # noqa: F401
            except ImportError:
                _log.warning(
                    "tensorboardX is not installed; metrics go to %s only "
                    "(pip install 'tensorboardX>=2.6,<3')",
                    self.path,
                )
            else:
                # purge_step hides events a resumed run writes again (TensorBoard drops steps >= it).
                purge = None if rewind_to is None else int(rewind_to) + 1
                # Event files are named by the second they were opened in: a second writer opened within
                # the same second would truncate the first one's file. A nanosecond suffix keeps them apart
                # and in the order TensorBoard must read them (it sorts by name) for purge_step to apply.
                self._tb = _Events(self.run_dir / TB_DIR, purge, f".{time.time_ns()}")

    def rewind(self, step: int) -> None:
        """Continue from ``step`` (a run restored from a checkpoint): later records are moved out.

        Records with a step above ``step`` are moved from ``metrics.jsonl`` to
        ``metrics.rewound.jsonl`` (kept, never deleted) and TensorBoard hides
        its events above ``step``, so every curve's counters only go forward.
        """
        self.close()
        self._open(step)

    @property
    def tensorboard(self) -> bool:
        """Whether TensorBoard events are being written."""
        return self._tb is not None

    def write(self, metrics: Mapping[str, Any], step: int) -> None:
        """Append one record for ``step`` with every scalar in ``metrics``.

        Values may be Python, numpy or JAX scalars (or size-1 arrays). Raises
        ``ValueError`` naming the key for a non-scalar / non-numeric value or a
        reserved key (``step``, ``wall_time``); nothing is written then.
        """
        if self._file is None:
            raise ValueError("MetricsWriter is closed")
        step = int(step)
        values: dict[str, int | float] = {}
        for key, value in metrics.items():
            if not isinstance(key, str) or not key:
                raise ValueError(f"metric keys must be non-empty strings, got {key!r}")
            if key in RESERVED_KEYS:
                raise ValueError(f"metric key {key!r} is reserved in {METRICS_FILE}")
            values[key] = _scalar(key, value)
        record: dict[str, Any] = {"step": step, "wall_time": time.time()}
        record.update({k: _json_value(v) for k, v in values.items()})
        try:
            self._file.write(json.dumps(record, allow_nan=False) + "\n")
            self._file.flush()
        except OSError as e:  # name the file and the row (a full disk's error does neither)
            raise OSError(e.errno, f"{e.strerror or e}; the metrics row at step {step} was not written (the rows "
                                   "before it are in the file)", str(self.path)) from e
        if self._tb is not None:
            try:
                for key, value in values.items():
                    self._tb.scalar(key, value, step)
                self._tb.flush()
            except OSError as e:
                raise OSError(e.errno, f"{e.strerror or e}; the TensorBoard events of the metrics row at step {step} "
                                       f"were not written (the row is in {self.path})", e.filename) from e

    def write_histogram(self, key: str, values: Any, step: int) -> None:
        """Log an array's distribution to TensorBoard (no-op without TensorBoard).

        Histograms are not written to ``metrics.jsonl``.
        """
        if self._file is None:
            raise ValueError("MetricsWriter is closed")
        if self._tb is not None:
            self._tb.histogram(key, np.asarray(values, dtype=np.float64).reshape(-1), int(step))

    def write_histogram_raw(self, key: str, histogram: Mapping[str, Any], step: int) -> None:
        """Log a histogram already counted (:func:`moozi.observe.histograms.leaf_histogram`) to TensorBoard
        (no-op without TensorBoard; not written to ``metrics.jsonl``)."""
        if self._file is None:
            raise ValueError("MetricsWriter is closed")
        if self._tb is not None:
            from tensorboardX.summary import histogram_raw

            h = histogram
            self._tb.summary(histogram_raw(key, min=h["min"], max=h["max"], num=h["num"], sum=h["sum"],
                                           sum_squares=h["sum_squares"], bucket_limits=list(h["bucket_limits"]),
                                           bucket_counts=list(h["bucket_counts"])), int(step))

    def write_image(self, key: str, image: Any, step: int) -> None:
        """Log an ``[H, W, 3]`` uint8 image to TensorBoard (no-op without TensorBoard)."""
        if self._file is None:
            raise ValueError("MetricsWriter is closed")
        if self._tb is not None:
            from tensorboardX.summary import image as image_summary

            self._tb.summary(image_summary(key, np.asarray(image, np.uint8), dataformats="HWC"), int(step))

    def flush(self) -> None:
        """Push buffered lines and events to disk."""
        if self._file is not None:
            self._file.flush()
        if self._tb is not None:
            self._tb.flush()

    @property
    def closed(self) -> bool:
        return self._file is None

    def close(self) -> None:
        """Flush and close the files (idempotent). Both are closed even if a flush fails (a full disk); then the
        first error is raised, naming its file."""
        file, tb, self._file, self._tb = self._file, self._tb, None, None
        first = None
        for close, path in ((file.close if file is not None else None, self.path),
                            (tb.close if tb is not None else None, tb.path if tb is not None else None)):
            try:
                if close is not None:
                    close()
            except OSError as e:
                first = first or OSError(e.errno, f"{e.strerror or e}; the last lines were not written", str(path))
        if first is not None:
            raise first

    def __enter__(self) -> "MetricsWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _drop_partial_last_line(path: Path) -> None:
    """Cut bytes after the last newline (a record cut short by a killed process)."""
    if not path.exists():
        return
    size = path.stat().st_size
    if size == 0:
        return
    with open(path, "rb+") as f:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        # Scan back for the last newline in blocks.
        pos, block = size, 65536
        cut = 0
        while pos > 0:
            start = max(0, pos - block)
            f.seek(start)
            chunk = f.read(pos - start)
            i = chunk.rfind(b"\n")
            if i >= 0:
                cut = start + i + 1
                break
            pos = start
        _log.warning("dropping a partial last line (%d bytes) from %s", size - cut, path)
        f.truncate(cut)


def _cut_after(path: Path, step: int, rewound: Path) -> None:
    """Keep the records of ``path`` up to ``step``; append the later ones to ``rewound`` (atomic rewrite). Two
    passes over the file as a stream: a long run's metrics are never held in memory."""
    if not path.exists():
        return

    def later(line: str) -> bool:
        try:
            return int(json.loads(line).get("step", 0)) > step
        except (ValueError, AttributeError, TypeError):
            return False

    with open(path, encoding="utf-8") as f:
        if not any(later(line) for line in f):
            return
    tmp, moved = path.with_name(path.name + ".tmp"), 0
    with open(path, encoding="utf-8") as src, open(tmp, "w", encoding="utf-8") as keep, \
            open(rewound, "a", encoding="utf-8") as out:
        for line in src:
            if later(line):
                out.write(line)
                moved += 1
            else:
                keep.write(line)
        for f in (out, keep):
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    _log.warning("%d metrics records after env step %d (work done after the restored checkpoint) moved to %s",
                 moved, step, rewound)


def _decode_value(v: Any) -> Any:
    if isinstance(v, str) and v in _NONFINITE:
        return _NONFINITE[v]
    return v


def training_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows the trainer writes per logged epoch (they carry ``perf/``), without the rows written beside them
    for a checkpoint (``checkpoint/*``), a gate (``gate/*``) or a tournament (``rating/*``)."""
    return [r for r in rows if "perf/env_steps_per_s" in r]


def read_metrics(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """All records of ``run_dir/metrics.jsonl`` (or a ``.jsonl`` file path), in order (:func:`iter_metrics`)."""
    return list(iter_metrics(run_dir))


def iter_metrics(run_dir: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """The records of ``run_dir/metrics.jsonl`` (or a ``.jsonl`` file path), in order, read as a stream (a
    resume of a long run holds one line at a time, not the file).

    Non-finite strings are turned back into floats. A truncated last line (a
    killed writer) is skipped; a bad line elsewhere raises ``ValueError`` with
    its line number. A missing file gives nothing.
    """
    path = Path(run_dir)
    if path.is_dir() or path.suffix != ".jsonl":
        path = path / METRICS_FILE
    if not path.exists():
        return
    bad = None  # (line number, error) of a bad line: an error only if a record follows it
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            if bad is not None:
                raise ValueError(f"{path}:{bad[0]}: bad metrics line: {bad[1]}") from bad[1]
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
            except ValueError as e:
                bad = (n, e)
                continue
            yield {k: _decode_value(v) for k, v in obj.items()}


def setup_logging(run_dir: str | os.PathLike, level: str | int = "INFO") -> logging.Logger:
    """The ``moozi`` logger, writing to ``run_dir/train.log`` (appending; rotated at :data:`LOG_MAX_BYTES`,
    :data:`LOG_KEEP` older files kept as ``train.log.1`` ...).

    Calling it again for the same file adds nothing (only the level changes);
    calling it for another run directory moves the file handler there. The
    logger still propagates to the root logger, so console handlers configured
    elsewhere keep working.
    """
    if isinstance(level, str):
        resolved = logging.getLevelName(level.upper())
        if not isinstance(resolved, int):
            raise ValueError(
                f"level = {level!r} is invalid: allowed DEBUG, INFO, WARNING, ERROR, CRITICAL"
            )
        level = resolved
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = (run_dir / LOG_FILE).resolve()
    logger = logging.getLogger("moozi")
    logger.setLevel(level)
    mine = [h for h in logger.handlers if getattr(h, "_moozi_run_log", False)]
    for h in mine:
        if Path(h.baseFilename) == path:
            h.setLevel(level)
            continue
        logger.removeHandler(h)
        h.close()
    if not any(getattr(h, "_moozi_run_log", False) for h in logger.handlers):
        # Rotated: a run of days keeps LOG_KEEP older files of LOG_MAX_BYTES (train.log.1 the newest of them).
        handler = logging.handlers.RotatingFileHandler(path, mode="a", maxBytes=LOG_MAX_BYTES,
                                                       backupCount=LOG_KEEP, encoding="utf-8")
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        )
        handler.setLevel(level)
        handler._moozi_run_log = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    return logger
