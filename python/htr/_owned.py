"""The one ownership pattern of the bindings: an object that owns one libhtr handle.

`handle` raises ValueError once the object is closed; close() releases the handle once (the
handle is forgotten before the C call, so a failing release is never retried on a freed
handle); the garbage collector and `with` close it too. A subclass stores its handle in
`self._handle`, defines `_release(handle)` (the C destroy or release call) and may override
`_closed` (the text of the error).
"""


class Owned:
    _handle = None
    _closed = "the object is closed"

    @property
    def handle(self):
        if self._handle is None:
            raise ValueError(f"htr: {self._closed}")
        return self._handle

    def _release(self, handle):
        raise NotImplementedError

    def close(self):
        if self._handle is not None:
            handle, self._handle = self._handle, None
            self._release(handle)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown, or a constructor that failed half-way
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
