"""The store's own formatting of list parameters is clickhouse-connect's, only faster (services/store/backends.py)."""

from __future__ import annotations

from clickhouse_connect.driver.binding import format_bind_value
from hypothesis import given
from hypothesis import strategies as st

from services.store.backends import bind_value


@given(st.lists(st.text(alphabet=st.sampled_from("ab\\'`\t\n\r\x00é😀 ") | st.characters(), max_size=40)))
def test_a_list_of_strings_binds_as_clickhouse_connect_binds_it(values):
    assert bind_value(values) == format_bind_value(values, None, True)


@given(st.one_of(st.integers(), st.text(), st.lists(st.integers()), st.dictionaries(st.text(), st.text())))
def test_other_values_are_clickhouse_connects(value):
    assert bind_value(value) == format_bind_value(value, None, True)
