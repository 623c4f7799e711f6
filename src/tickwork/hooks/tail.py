"""The end of an attempt's output, kept for its callbacks."""

from __future__ import annotations

from collections import deque

DEFAULT_LINES = 50
DEFAULT_BYTES = 8 * 1024


class LogTail:
    """A ``LogSink`` that keeps only the end of what is written to it, every stream
    interleaved as written: :meth:`text` is at most the last ``max_lines`` lines and at most
    ``max_bytes`` bytes of UTF-8.

    Writes are kept whole and the oldest are dropped once the newer ones alone hold enough,
    so memory stays bounded by about twice ``max_bytes`` characters whatever the task prints,
    and a write costs a newline count, not a copy of the tail.
    """

    def __init__(self, max_lines: int = DEFAULT_LINES, max_bytes: int = DEFAULT_BYTES) -> None:
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._chunks: deque[tuple[str, int]] = deque()  # (text, its newline count)
        self._chars = 0
        self._lines = 0

    def write(self, stream: str, data: str) -> None:
        if not data:
            return
        # A character is at least one byte: the last max_bytes characters hold the tail.
        data = data[-self._max_bytes :]
        newlines = data.count("\n")
        self._chunks.append((data, newlines))
        self._chars += len(data)
        self._lines += newlines
        while len(self._chunks) > 1:
            first, first_lines = self._chunks[0]
            chars, lines = self._chars - len(first), self._lines - first_lines
            # The rest still holds max_lines whole lines or max_bytes: the first is not needed.
            if chars < self._max_bytes and lines <= self._max_lines:
                break
            self._chunks.popleft()
            self._chars, self._lines = chars, lines

    def text(self) -> str:
        """The last ``max_lines`` lines of what was written, cut to its last ``max_bytes``."""
        text = "".join(chunk for chunk, _ in self._chunks)
        cut = len(text) - 1 if text.endswith("\n") else len(text)
        for _ in range(self._max_lines):
            cut = text.rfind("\n", 0, cut)
            if cut < 0:
                break
        text = text[cut + 1 :]
        encoded = text.encode()
        if len(encoded) <= self._max_bytes:
            return text
        # Dropping a character cut in half at the start is fine; inventing one is not.
        return encoded[-self._max_bytes :].decode(errors="ignore")
