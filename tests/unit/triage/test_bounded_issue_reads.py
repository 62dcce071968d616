"""What one person can put on an issue cannot make its reads unbounded or its page misleading (issue 51): the
activity comes a page at a time (400 notes made one read 3.5 MB), and a ticket link's bidirectional controls are
written out, not obeyed, with the whole URL on hover. The real API over a real chDB store."""

from __future__ import annotations

import html
import re

import pytest

from tests.unit.triage.test_activity import AUTH, post, world  # noqa: F401  (world is a fixture)

NOTES, TEXT = 120, "tried " + "x" * 3990


@pytest.mark.slow
def test_an_issue_read_gives_its_activity_a_page_at_a_time(world):  # noqa: F811
    _, _, client = world
    for n in range(NOTES):
        assert post(client, "iss-a/notes", {"text": f"{n:03d} {TEXT}", "by": "sam"}).status_code == 201
    first = client.get("/api/issues/iss-a")
    shown = first.json()
    assert len(shown["activity"]) == 50 and shown["activity_offset"] == 0 and shown["activity_total"] > NOTES
    assert len(first.content) < 600_000, len(first.content)  # 50 notes of 4,000 characters, not all 120
    assert "history" not in shown
    older = client.get("/api/issues/iss-a", params={"activity_offset": 50, "activity_limit": 200}).json()
    newest_first = [e["text"][:3] for e in shown["activity"] + older["activity"] if e["event"] == "note"]
    assert newest_first == [f"{n:03d}" for n in reversed(range(NOTES))]
    assert client.get("/api/issues/iss-a", params={"activity_limit": 201}).status_code == 422

    page = client.get("/issues/iss-a").text
    listed = re.search(r'<ol id="activity".*?</ol>', page, re.S).group(0)
    assert listed.count("<li>") == 50 and 'href="?activity_offset=50#activity">older</a>' in page
    assert client.get("/issues/iss-a", params={"activity_offset": 100}).text.count(f"{NOTES - 101:03d} tried") == 1


def test_a_ticket_links_bidirectional_controls_are_written_out_with_the_url_on_hover(world):  # noqa: F811
    _, _, client = world
    url = "https://tickets.example/\u202egpj.exe/PAY-7"
    assert post(client, "iss-a/link", {"url": url, "by": "sam"}).status_code == 200
    page = client.get("/issues/iss-a").text
    link = re.search(r'<a id="ticket"[^>]*>(.*?)</a>', page, re.S)
    assert "\u202e" not in html.unescape(link.group(1))
    assert html.unescape(link.group(1)) == "https://tickets.example/<U+202E>gpj.exe/PAY-7"
    assert 'title="https://tickets.example/&lt;U+202E&gt;gpj.exe/PAY-7"' in link.group(0)
