"""A program on a real pseudo-terminal, and the screen a terminal would show for what it wrote (test helper).

`Screen` plays the few control sequences kubetrain writes (carriage return, newline, clear line, clear to the
end of the screen, cursor up to a line's start, colours), enough to say what a person sees at the end.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import time
from collections.abc import Sequence

_CONTROL = re.compile(r"\x1b\[(\d*)([A-Za-z])|\r|\n|[^\x1b\r\n]+")


class Screen:
    def __init__(self) -> None:
        self.lines: list[str] = [""]
        self.row = 0
        self.col = 0

    def feed(self, text: str) -> None:
        for m in _CONTROL.finditer(text):
            token = m.group(0)
            if token == "\r":
                self.col = 0
            elif token == "\n":
                self.row += 1
                self.col = 0
                while len(self.lines) <= self.row:
                    self.lines.append("")
            elif m.group(2) is not None:
                n, code = int(m.group(1) or 1), m.group(2)
                line = self.lines[self.row]
                if code == "K":  # clear to the end of the line
                    self.lines[self.row] = line[: self.col]
                elif code == "J":  # clear to the end of the screen
                    self.lines[self.row] = line[: self.col]
                    del self.lines[self.row + 1 :]
                elif code == "F":  # up n lines, to their start
                    self.row, self.col = max(0, self.row - n), 0
            else:
                line = self.lines[self.row].ljust(self.col)
                self.lines[self.row] = line[: self.col] + token + line[self.col + len(token) :]
                self.col += len(token)

    def text(self) -> list[str]:
        return [line.rstrip() for line in self.lines]


class TerminalSession:
    """`argv` with its stdin, stdout and stderr on one pseudo-terminal, 120 columns wide."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        import fcntl
        import struct
        import termios

        self.main, secondary = os.openpty()
        fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.proc = subprocess.Popen(
            list(argv),
            stdin=secondary,
            stdout=secondary,
            stderr=secondary,
            env={**os.environ, "TERM": "xterm", **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
        os.close(secondary)
        self.raw = ""
        self.screen = Screen()

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.main], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.main, 65536)
        except OSError:  # the program has ended and closed the terminal
            return False
        if not data:
            return False
        text = data.decode("utf-8", "replace")
        self.raw += text
        self.screen.feed(text)
        return True

    def expect(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """Read until `pattern` appears in the raw output (the deadline only bounds a failure)."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while (m := regex.search(self.raw)) is None:
            left = deadline - time.monotonic()
            assert left > 0, f"{pattern!r} never appeared; output so far:\n{self.raw[-3000:]}"
            if not self._read(min(left, 1.0)):
                m = regex.search(self.raw)
                assert m is not None, f"{pattern!r} not in the output:\n{self.raw}"
                return m
        return m

    def finish(self, timeout: float = 120.0) -> int:
        """Read to the end; the exit status."""
        deadline = time.monotonic() + timeout
        while self._read(1.0):
            assert time.monotonic() < deadline, self.raw[-3000:]
            if self.proc.poll() is not None and not select.select([self.main], [], [], 0)[0]:
                break
        os.close(self.main)
        return self.proc.wait(timeout)
