"""Shared pieces of the command line: the group, settings flags, and the one way it reads and changes things.

The CLI is a client of the API only. It asks the running API; when none answers (or it serves another store than
the one named), it runs the same API app in-process over the store and says so once. So every change passes the
same checks, online or not, and every answer has the same shape.

The API is reached through the `Api` in the click context's ``obj``: ``main`` makes one (its clients are made on
first use and closed when the command ends); tests pass their own, e.g.
``CliRunner().invoke(main, args, obj=Api(test_client))``.
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import httpx
import orjson
from rich.console import Console

from services.app.cli.replies import Client, Reply
from services.app.settings import Settings, SettingsError, settings_from, settings_layers
from services.core.files import ProcessRecord

console = Console(stderr=True)
out = Console()


class Abort(click.ClickException):
    """A user-facing error: printed without a traceback, exit code 1."""


class Api:
    """How the command line reaches a claimwatch API: the running one through ``client`` when given (a test's),
    else one httpx client of its own; and, when none answers, the same app in-process over the named store."""

    TIMEOUT_SECONDS = 30

    def __init__(self, client: httpx.Client | None = None):
        self._client = client
        self._owned = client is None
        self.serves: dict[tuple[str, str], bool] = {}  # (API url, named store) -> whether it serves it: asked once
        self._in_process: dict[str, tuple[Client, Any]] = {}  # store -> (client of the app, its components)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        if self._client is None:
            self._client = httpx.Client(timeout=self.TIMEOUT_SECONDS)
        return self._client.request(method, url, **kwargs)

    def in_process(self, settings: Settings) -> Client:
        """A client of the API app run in this process over ``settings.clickhouse``, with the token rules of
        `claimwatch up` (services/app/credentials.py: with_serving_tokens)."""
        if settings.clickhouse not in self._in_process:
            from fastapi.testclient import TestClient

            from services.app.compose import in_process_api
            from services.app.credentials import CredentialsError, with_serving_tokens
            from services.core.command import cli_path
            from services.core.errors import StoreError

            try:
                app, components = in_process_api(with_serving_tokens(settings)[0], cli_path())
            except (StoreError, CredentialsError, OSError) as exc:
                raise Abort(f"no claimwatch API answers at {settings.api.url}, and {exc}") from None
            self._in_process[settings.clickhouse] = (TestClient(app, base_url=settings.api.url), components)
        return self._in_process[settings.clickhouse][0]

    def close(self) -> None:
        if self._owned and self._client is not None:
            self._client.close()
        for client, components in self._in_process.values():
            client.close()
            components.close()
        self._in_process.clear()


def api() -> Api:
    """The running command's Api (``main`` puts it in the click context)."""
    found = click.get_current_context().find_object(Api)
    if found is None:
        raise RuntimeError("no Api in the click context: run the command through main")
    return found


def service_options(fn: Callable) -> Callable:
    """The flags every command that touches a service takes."""

    @click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False),
        default=None,
        envvar="CLAIMWATCH_CONFIG",
        help="TOML settings file (lowest precedence).",
    )
    @click.option("--kafka", default=None, help="Kafka bootstrap list HOST:PORT[,...]. Unset: the embedded broker.")
    @click.option(
        "--clickhouse",
        default=None,
        help="chdb:PATH (default chdb:./var/clickhouse) or http(s)://user:pass@host:port/db.",
    )
    @click.option("--topic-prefix", default=None, help="Topic name prefix (default claimwatch).")
    @click.option(
        "--api", "api_url", default=None, help="URL of a running claimwatch API (default http://127.0.0.1:8080)."
    )
    @functools.wraps(fn)
    def wrapper(
        config_file: str | None,
        kafka: str | None,
        clickhouse: str | None,
        topic_prefix: str | None,
        api_url: str | None,
        **kwargs: Any,
    ) -> Any:
        flags: dict[str, Any] = {"kafka": kafka, "clickhouse": clickhouse, "topic_prefix": topic_prefix}
        if api_url:
            flags["api"] = {"url": api_url}
        try:
            layers = settings_layers(config_file, os.environ, flags)
            settings = settings_from(layers)
        except SettingsError as exc:
            raise Abort(str(exc)) from None
        click.get_current_context().meta[SETTINGS_LAYERS] = layers  # `claimwatch config show` names each source
        return fn(with_local_stack(settings), **kwargs)

    return wrapper


SETTINGS_LAYERS = "claimwatch.settings_layers"

# `claimwatch up` run in this folder says where its API is while it runs (services/app/cli/stack.py)
STACK_RECORD = ProcessRecord(Path("var") / "stack.json")


def with_local_stack(settings: Settings) -> Settings:
    """The API of a `claimwatch up` running from this folder, unless the API's address was set (--api, api.url,
    api.port): one setting moves a stack, and the CLI beside it follows."""
    if settings.api.model_fields_set & {"url", "port"}:
        return settings
    record = STACK_RECORD.read()
    if record is None or record.get("url") in (None, settings.api.url):
        return settings
    return settings.model_copy(update={"api": settings.api.model_copy(update={"url": str(record["url"])})})


def on_store(settings: Settings, job: Callable[[Any], None], unavailable: str) -> None:
    """Run a job that is no request (re-clustering) on the store files: `job(components)`."""
    from services.app.compose import open_components
    from services.core.command import cli_path
    from services.core.errors import StoreError

    try:
        components = open_components(settings, cli=cli_path())  # runbooks print commands as this user runs them
    except StoreError as exc:
        raise Abort(unavailable.format(exc=exc)) from None
    try:
        job(components)
    finally:
        components.close()


def reach(
    settings: Settings, path: str, params: dict | None = None, method: str = "GET", body: dict | None = None
) -> Any:
    """The API's answer (JSON, else text): the running API's, else the same app's in-process."""
    return _content(answer(settings, path, params, method, body))


_said: set[str] = set()  # what this process has told its user once already


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        console.print(message, style="dim", markup=False, highlight=False, soft_wrap=True)


def _serves_the_named_store(settings: Settings) -> bool:
    """Whether the API at settings.api.url serves the store the user named (--clickhouse, CLAIMWATCH_CLICKHOUSE, a
    config file), or, when they named neither store nor API, the embedded store this folder holds (a stack that ran
    here and has stopped); True otherwise, or when the API does not say. It must never answer for another stack."""
    if "clickhouse" not in settings.model_fields_set and not _holds_its_own_store(settings):
        return True
    key, asked = (settings.api.url, settings.clickhouse), api().serves
    if key not in asked:
        asked[key] = _asks_the_named_store(settings)
    return asked[key]


def _holds_its_own_store(settings: Settings) -> bool:
    """No API was named (a running `claimwatch up` from here names its own: with_local_stack) and the default
    embedded store lies in this folder: an API that serves another store belongs to another stack."""
    path = settings.clickhouse.removeprefix("chdb:")
    named_api = bool(settings.api.model_fields_set & {"url", "port"})
    return not named_api and settings.clickhouse.startswith("chdb:") and Path(path or "var/clickhouse").is_dir()


def _asks_the_named_store(settings: Settings) -> bool:
    from services.store.backends import public_url

    try:
        about = api().request("GET", settings.api.url.rstrip("/") + "/api/about", headers=auth_headers(settings))
    except httpx.TransportError:
        return True  # nothing answers: the caller finds that out itself
    said_json = about.status_code == 200 and about.headers.get("content-type", "").startswith("application/json")
    served = about.json().get("store") if said_json else None  # (another service on the port says nothing)
    if served is None or served == public_url(settings.clickhouse):
        return True
    _say_once(
        f"the claimwatch API at {settings.api.url} serves another store ({served}); reading "
        f"{public_url(settings.clickhouse)} directly"
    )
    return False


def reach_page(settings: Settings, path: str, params: dict) -> tuple[list, int | None]:
    """A page of a list and how many items the list holds (the API's ``X-Total-Count``; None from an API that
    does not say)."""
    response = answer(settings, path, params)
    total = response.headers.get("X-Total-Count", "")
    return _content(response), int(total) if total.isdigit() else None


def answer(
    settings: Settings, path: str, params: dict | None = None, method: str = "GET", body: dict | None = None
) -> Reply:
    """The API's answer to one request: the running API's; when none answers at settings.api.url, or it serves
    another store than the one named, the in-process app's, said once. A refusal aborts with what it said."""
    response: Reply | None = None
    if _serves_the_named_store(settings):
        try:
            response = api().request(
                method, settings.api.url.rstrip("/") + path, params=params, **_sent(settings, body)
            )
        except httpx.TransportError:
            _say_once(f"no claimwatch API at {settings.api.url}; reading {settings.clickhouse} directly")
    if response is None:
        app = api().in_process(settings)  # (made first: it keeps a token for the URL when there is none)
        response = app.request(method, path, params=params, **_sent(settings, body))
    if response.status_code >= 400:
        raise Abort(refusal(response, settings.api.url + path))
    return response


def _sent(settings: Settings, body: dict | None) -> dict[str, Any]:
    """The token and the body, as sent: a name the user did not give goes as a header (``DefaultName``)."""
    from services.api.security import DEFAULT_BY_HEADER

    headers = auth_headers(settings)
    for field, value in (body or {}).items():
        if isinstance(value, DefaultName):  # the API records a named token's holder; this name only without one
            headers[DEFAULT_BY_HEADER] = value
            body = {**(body or {}), field: None}
    return {"headers": headers, "json": body}


def _content(response: Reply) -> Any:
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    return response.text


def command_line(**changes: Any) -> str:
    """The running command as the user types it again, with ``changes`` to its options: the options they gave on
    the command line (not those from the environment or the defaults, which a pasted line gets anyway)."""
    from click.core import ParameterSource

    from services.core.command import cli_command

    ctx = click.get_current_context()
    names: list[str] = []
    at = ctx
    while at.parent is not None:
        names.insert(0, at.info_name or "")
        at = at.parent
    words = []
    for param in ctx.command.params:
        name = param.name or ""
        if name in changes:
            value = changes[name]
        elif ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE:
            value = ctx.params[name]
        else:
            continue
        if isinstance(param, click.Argument):
            words += [str(v) for v in (value if param.multiple else [value])]
        elif value is not None and not (getattr(param, "is_flag", False) and not value):
            flag = max(param.opts, key=len)  # the long form
            values = [] if getattr(param, "is_flag", False) else value if param.multiple else [value]
            words += [flag] if not values else [w for v in values for w in (flag, str(v))]
    return " ".join([cli_command(), *map(shlex.quote, [*names, *words])])


def refusal(response: Reply, where: str) -> str:
    """What the API answered, as the user reads it: a 4xx is one sentence (the caller has something to fix);
    other errors also say where they came from."""
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail", response.text) if isinstance(body, dict) else response.text[:300]
    detail = as_run_here(str(detail))
    if 400 <= response.status_code < 500:
        return f"{detail} (HTTP {response.status_code})"
    return f"{where}: HTTP {response.status_code}: {detail}"


def as_run_here(sentence: str) -> str:
    """An API's sentence names commands as `claimwatch ...`; printed here, they read as this user runs them."""
    from services.core.command import cli_command

    return sentence.replace("`claimwatch ", f"`{cli_command()} ")


def text_or_json(fn: Callable) -> Callable:
    """``-o text|json`` and its shorthand ``--json``, for the commands that show one thing."""
    fn = click.option("--json", "as_json", is_flag=True, help="Same as -o json.")(fn)
    return click.option(
        "-o",
        "--output",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="text: readable; json: the API's JSON.",
    )(fn)


def by_option(help: str) -> Callable:
    """``--by``, optional: left out, the change is recorded under identity.name or the login name (see ``who``)."""
    return click.option(
        "--by",
        default=None,
        metavar="NAME",
        help=f"{help} Default: identity.name (CLAIMWATCH_IDENTITY__NAME), else your login name.",
    )


class DefaultName(str):
    """A name the user did not give (--by left out): to the API it goes as ``DEFAULT_BY_HEADER``, which counts only
    with a token that has no name. A named token's holder is who signs; the CLI sends no name of its own."""


def who(settings: Settings, by: str | None) -> str:
    """The name to record a change under: --by, else identity.name, else the login name (a ``DefaultName``)."""
    from services.app.identity import IdentityError, signer

    try:
        name = signer(by, settings.identity.name)
        return name if by is not None else DefaultName(name)
    except IdentityError as exc:
        raise Abort(str(exc)) from None


def auth_headers(settings: Settings) -> dict[str, str]:
    """$CLAIMWATCH_TOKEN, else the token `claimwatch up` stored for settings.api.url."""
    from services.app.credentials import find_token

    found = find_token(settings.api.url)
    return {"Authorization": f"Bearer {found[0]}"} if found else {}


def say_if_merged(asked: str, acted_on: str) -> None:
    """A change asked of a merged issue went to the issue it joined (services/issues/records.py: surviving)."""
    if acted_on != asked:
        console.print(f"{asked} was merged into {acted_on}")


def print_json(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Log more.")
@click.pass_context
def main(ctx: click.Context, verbose: bool) -> None:
    """claimwatch: claim-level hallucination monitoring for RAG and LLM products."""
    if not isinstance(ctx.obj, Api):  # a test may have passed its own (invoke(..., obj=Api(client)))
        ctx.obj = Api()
    ctx.call_on_close(ctx.obj.close)  # (a test's client stays open; the in-process app is closed)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if not verbose:  # the Kafka clients narrate transient reconnects at WARNING
        for name in ("kafka", "aiokafka"):
            logging.getLogger(name).setLevel(logging.ERROR)
