"""A crashed worker's last line: why it stopped and what to do, on one line."""

from aiokafka.errors import UnsupportedCodecError

from services.app.processes import crash_message


def test_a_missing_codec_names_the_codec_and_the_package_to_install():
    message = crash_message(UnsupportedCodecError("Libraries for zstd compression codec not found"))
    assert "zstd" in message and "pip install 'aiokafka[lz4,snappy,zstd]'" in message
    assert message.count("UnsupportedCodecError") == 1


def test_any_other_error_says_a_restart_resumes_and_stays_on_one_line():
    message = crash_message(RuntimeError("first line\nsecond line"))
    assert "\n" not in message and "RuntimeError: first line second line" in message
    assert "restart" in message and "committed offsets" in message
