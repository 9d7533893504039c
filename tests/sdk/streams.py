"""Reading SDK streams in tests without ever hanging them."""
import queue
import threading

END = object()
# The longest wait for one item, or for a stream's end.
WAIT = 10.0


class Reader:
    """Iterates an SDK stream in a thread; items arrive in a queue, then END (or the error).

    The stream is opened in the thread too: the SDK's call returns only once the server
    sent its headers, so a server that held them back could not hang the test.
    """

    def __init__(self, open_stream):
        self.open_stream = open_stream
        self.items = queue.Queue()
        self.status_code = None
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        try:
            with self.open_stream() as stream:
                self.status_code = stream.response.status_code
                for item in stream:
                    self.items.put(item)
        except Exception as error:  # raised again in the test thread
            self.items.put(error)
        finally:
            self.items.put(END)

    def next(self, timeout=WAIT):
        try:
            item = self.items.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing from the stream within {timeout} s") from None
        if isinstance(item, Exception):
            raise item
        return item

    def take(self, count):
        taken = []
        while len(taken) < count:
            taken.append(self.until(lambda item: True)[0])
        return taken

    def until(self, predicate):
        """Items up to and including the first one for which predicate(item) holds."""
        taken = []
        while True:
            item = self.next()
            assert item is not END, f"the stream ended after {taken}"
            taken.append(item)
            if predicate(item):
                return taken

    def rest(self):
        """Every item until the stream ends (it must end within WAIT of the last one)."""
        taken = []
        while (item := self.next()) is not END:
            taken.append(item)
        self.thread.join(timeout=WAIT)
        assert not self.thread.is_alive()
        return taken
