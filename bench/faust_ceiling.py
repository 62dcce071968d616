"""The Faust ceiling: an agent that takes batches the way the ingest agent does and acks
them, doing no other work. Run by bench/ingest.py as a subprocess (a Faust worker owns
its process); prints one line, ``events_per_second <float> cpu_per_event <float>`` (CPU seconds
of the whole process per message), and exits. With ``inline`` it uses the worker's transport, which
delivers each message without mode's per-message tasks (streams/transport.py), instead of Faust's own.

    python bench/faust_ceiling.py BOOTSTRAP TOPIC EVENTS BATCH [inline]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import faust

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.core.gcpolicy import tune_for_bulk  # noqa: E402
from streams.transport import InlineDeliveryApp  # noqa: E402


def main(bootstrap: str, topic_name: str, expected: int, batch_size: int, inline: bool) -> None:
    app = (InlineDeliveryApp if inline else faust.App)(
        f"ceiling-{os.getpid()}",
        broker=f"kafka://{bootstrap}",
        autodiscover=False,
        web_enabled=False,
        store="memory://",
        datadir=tempfile.mkdtemp(prefix="cw-faust-ceiling-"),
        consumer_auto_offset_reset="earliest",
        stream_buffer_maxsize=max(4096, batch_size * 3),
        logging_config=None,
    )
    topic = app.topic(topic_name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
    state = {"seen": 0, "first": None}

    @app.agent(topic)
    async def drain(stream):
        async for batch in stream.noack_take(batch_size, within=0.5):
            now = time.perf_counter()
            if state["first"] is None:
                state["first"], state["skipped"] = now, len(batch)  # group join is not counted
                state["cpu"] = time.process_time()
            for event in batch:
                await stream.ack(event)
            state["seen"] += len(batch)
            if state["seen"] >= expected:
                counted = state["seen"] - state["skipped"]
                cpu = (time.process_time() - state["cpu"]) / counted
                print(f"events_per_second {counted / (now - state['first']):.1f} cpu_per_event {cpu:.9f}", flush=True)
                os._exit(0)

    tune_for_bulk()  # as the worker does
    faust.Worker(app, loglevel="warning", quiet=True, redirect_stdouts=False).execute_from_commandline()


if __name__ == "__main__":
    sys.argv, args = sys.argv[:1], sys.argv[1:]  # Faust's Worker parses argv itself
    main(args[0], args[1], int(args[2]), int(args[3]), args[4:] == ["inline"])
