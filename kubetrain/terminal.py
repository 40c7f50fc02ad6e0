"""Replicas' output on a terminal: one line per record, prefixed `[role-index]`, a stable colour per replica.

Both backends stream a running job's output through a sink (`contract.logs.LogSink`); this is the one the
CLI and `kubetrain.run` use. Standard library only.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TextIO

from .contract.logs import LogRecord

# Distinct foreground colours, the most legible first; red comes last so that
# a replica's prefix is not mistaken for an error.
_PALETTE = ("36", "33", "32", "35", "34", "96", "93", "92", "95", "94", "31", "91")

# Terminal control sequences a replica may print: CSI (colours, cursor moves, clearing the screen), OSC (window
# titles, hyperlinks, clipboard writes), and the other ESC-introduced ones.
_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC, ended by BEL or ST
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # any other escape
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
# Control characters, and the Unicode controls that reorder or hide text (bidirectional embeddings, overrides
# and isolates, the "Trojan Source" characters; zero-width joiners are left: scripts need them): a line
# showing `\u202e` cannot make what follows read backwards.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CELL_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """`text` with every control character (tabs and newlines too) and every text-reordering mark shown
    escaped (`\\x1b`, `\\u202e`): for a value that must stay one cell of a table on a terminal, such as a
    metric's name, where nothing may be removed unseen and nothing may reach the terminal as a command."""
    return _CELL_CONTROL.sub(lambda m: _escaped(m.group()), text)


def sanitize(text: str) -> str:
    """One line of a replica's output made safe for a terminal: escape sequences removed (a replica cannot
    recolour, move the cursor, retitle or write the clipboard of the terminal that shows it), a carriage
    return keeps what a terminal would show (a progress bar's last state), other control characters shown
    escaped (``\\x07``), and so are the Unicode controls that reorder text (``\\u202e``). Tabs stay. The
    web view shows replicas' lines through this too."""
    if "\r" in text:
        text = next((part for part in reversed(text.split("\r")) if part), "")
    text = _SEQUENCE.sub("", text)
    return _CONTROL.sub(lambda m: _escaped(m.group()), text)


def _wants_color(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class OutputSink:
    """Prints replicas' output live, each line prefixed ``[key] `` with a stable colour per replica.

    Lines are queued by :meth:`line` and written whole by :meth:`flush`, one
    write per round, so lines of different replicas never interleave mid-line.
    A replica's stdout goes to ``out`` and its stderr to ``err`` (default: our
    own stdout and stderr), so redirecting ``kubetrain run`` works as with any
    launcher. Colour is used on a terminal unless ``NO_COLOR`` is set;
    ``color=True``/``False`` forces it. Terminal escape sequences and control
    characters in replicas' lines are removed or shown escaped (:func:`sanitize`)
    unless ``raw=True`` (``--raw``). If the output is gone (``| head``),
    printing stops quietly: the log files still get everything.

    Safe to use from several threads, and one blocked writing (a terminal nobody
    reads) blocks no other: lines queued meanwhile are left to the thread that
    is writing, and the lock is never held across a write. Real files are written
    with ``write(2)`` on their descriptor, not through Python's buffer, so a
    thread stuck there holds no lock the interpreter needs to exit.
    """

    def __init__(
        self,
        out: TextIO | None = None,
        err: TextIO | None = None,
        *,
        color: bool | None = None,
        keys: Iterable[str] = (),
        raw: bool = False,
    ) -> None:
        self.raw = raw
        self._out = out if out is not None else sys.stdout
        self._err = err if err is not None else sys.stderr
        self._color = {id(s): (color if color is not None else _wants_color(s)) for s in (self._out, self._err)}
        self._colors: dict[str, str] = {}
        self._width = 0
        self._queued: dict[int, list[str]] = {id(self._out): [], id(self._err): []}
        self._lock = threading.Lock()
        self._writing = False  # a thread is in flush(), writing
        self._broken: set[int] = set()
        self.add_keys(keys)

    def add_keys(self, keys: Iterable[str]) -> None:
        """Register replicas in display order: colours follow this order and prefixes are padded to align."""
        with self._lock:
            for k in keys:
                if k not in self._colors:
                    self._colors[k] = _PALETTE[len(self._colors) % len(_PALETTE)]
                    self._width = max(self._width, len(k) + 2)

    def prefix(self, key: str, colored: bool) -> str:
        if key not in self._colors:
            self.add_keys([key])
        label = f"[{key}]"
        pad = " " * (self._width - len(label) + 1)
        if colored:
            return f"\x1b[{self._colors[key]}m{label}\x1b[0m{pad}"
        return label + pad

    def line(self, key: str, stream: str, text: str) -> None:
        """Queue one line (without its newline) of replica ``key``'s ``stream``."""
        target = self._err if stream == "stderr" else self._out
        pre = self.prefix(key, self._color[id(target)])
        if not self.raw:
            text = sanitize(text)
        with self._lock:
            self._queued[id(target)].append(f"{pre}{text}\n")

    def record(self, rec: LogRecord) -> None:
        """Queue a record read back from a log file (``logs -f``)."""
        self.line(rec.key, rec.stream, rec.text)

    # -- the live status line (`kubetrain.progress`) ------------------------------------------------------
    status_line: Callable[[], str] | None = None
    """Set by an attached `kubetrain run` on a terminal: the text of one status line kept under the output.
    Each flush erases it (carriage return, clear line), writes the lines, and draws it again, so it is never
    inside a line. Returning "" erases it for good."""
    _redraw = False

    def note(self, text: str, stream: str = "stderr") -> None:
        """Queue a line of kubetrain's own, unprefixed (so it, too, goes above the status line)."""
        with self._lock:
            self._queued[id(self._err if stream == "stderr" else self._out)].append(f"{text}\n")

    def redraw_status(self) -> None:
        """Draw the status line again now, with no new lines (its text changed)."""
        with self._lock:
            self._redraw = True
        self.flush()

    def clear_status(self, wait: float = 2.0) -> None:
        """Erase the status line for good. Another thread may be in the middle of a write: it takes the erase
        after its write, so the line is forgotten only once that write is done (or after `wait` seconds, for a
        terminal that stopped reading) — forgetting it earlier would leave it on the screen."""
        with self._lock:
            if self.status_line is None:
                return
            self.status_line = lambda: ""
            self._redraw = True
        self.flush()
        deadline = time.monotonic() + wait
        while True:
            with self._lock:
                if (not self._writing and not self._redraw) or time.monotonic() > deadline:
                    self.status_line = None
                    return
            time.sleep(0.005)  # a write in another thread finishing; bounded by `wait`

    def flush(self) -> None:
        """Write the queued lines (unless another thread is writing: it takes them after its write)."""
        with self._lock:
            if self._writing:
                return
            self._writing = True
        try:
            while True:
                with self._lock:
                    work = []
                    for target in (self._out, self._err):
                        queued = self._queued[id(target)]
                        if queued and id(target) not in self._broken:
                            work.append((target, "".join(queued)))
                        queued.clear()
                    redraw, self._redraw = self._redraw, False
                    if not work and not redraw:
                        self._writing = False
                        return
                    if self.status_line is not None and id(self._out) not in self._broken:
                        work = [(self._out, "\r\x1b[K"), *work, (self._out, self.status_line())]
                for target, text in work:
                    self._write(target, text)
        except BaseException:
            with self._lock:
                self._writing = False
            raise

    def _write(self, target: TextIO, text: str) -> None:
        try:
            fd = _descriptor(target)
            if fd is None:
                try:
                    target.write(text)
                except UnicodeEncodeError:
                    # A terminal that cannot show some character must not lose the line.
                    enc = getattr(target, "encoding", None) or "ascii"
                    target.write(text.encode(enc, "replace").decode(enc))
                target.flush()
                return
            target.flush()  # what was printed through it before goes first
            data = memoryview(text.encode(getattr(target, "encoding", None) or "utf-8", "replace"))
            while data:
                try:
                    data = data[os.write(fd, data) :]
                except InterruptedError:
                    continue
        except (OSError, ValueError):
            with self._lock:
                self._broken.add(id(target))


def _descriptor(target: TextIO) -> int | None:
    """The file descriptor under a real file (None for in-memory streams and notebook outputs)."""
    try:
        fd = target.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return fd if isinstance(fd, int) and fd >= 0 else None


__all__ = ["OutputSink", "escape_controls", "sanitize"]
