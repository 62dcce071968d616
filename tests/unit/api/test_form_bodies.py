"""What the dashboard's forms send (static/app.js, run in node with a stub DOM): matchers split on newlines only,
and the End-silence DELETE carries who ends it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

APP_JS = Path(__file__).resolve().parents[3] / "services/api/static/app.js"
HARNESS = """
const fs = require("fs");
const spec = JSON.parse(process.argv[2]);
let ready, submit, sent;
const store = () => ({getItem: () => null, setItem() {}, removeItem() {}});
const form = {
  elements: spec.fields.map(f => ({name: f.name, value: f.value, type: "text", required: true,
                                   getAttribute: k => (k === "data-list" ? f.list || null : null)})),
  getAttribute: k => ({"data-method": spec.method, "data-path": "/api/x"})[k] || null,
  querySelector: sel => (sel === "[name]" && spec.fields.length ? {} : null),
  querySelectorAll: () => [],
  addEventListener: (_, fn) => { submit = fn; },
};
global.window = {sessionStorage: store(), localStorage: store(), location: {reload() {}}};
global.document = {
  addEventListener: (_, fn) => { ready = fn; }, getElementById: () => null,
  querySelectorAll: sel => (sel === "form.api-form" ? [form] : []),
};
global.fetch = (path, init) => { sent = init; return new Promise(() => {}); };
eval(fs.readFileSync(process.argv[1], "utf8"));
ready();
submit({currentTarget: form, preventDefault() {}});
console.log(JSON.stringify(sent.body === undefined ? null : JSON.parse(sent.body)));
"""


def sent_body(method: str, fields: list[dict]):
    node = shutil.which("node")
    assert node, "node is needed to run the dashboard's app.js (Debian: apt-get install nodejs)"
    spec = json.dumps({"method": method, "fields": fields})
    out = subprocess.run(
        [node, "-e", HARNESS, str(APP_JS), spec], capture_output=True, text=True, timeout=30, check=True
    )
    return json.loads(out.stdout)


def test_matchers_are_split_on_newlines_only_so_regex_counts_survive():
    body = sent_body("POST", [{"name": "matchers", "list": "lines", "value": "route=~a{1,3}\r\nseverity=warning\n"}])
    assert body == {"matchers": ["route=~a{1,3}", "severity=warning"]}


def test_a_delete_form_with_fields_sends_them_and_one_without_sends_no_body():
    assert sent_body("DELETE", [{"name": "by", "value": "ana"}]) == {"by": "ana"}
    assert sent_body("DELETE", []) is None
