import pytest

from json_pointer import JsonPointerError, parse_pointer, resolve

# Example document from RFC 6901, section 5.
RFC_DOC = {
    "foo": ["bar", "baz"],
    "": 0,
    "a/b": 1,
    "c%d": 2,
    "e^f": 3,
    "g|h": 4,
    "i\\j": 5,
    'k"l': 6,
    " ": 7,
    "m~n": 8,
}


def test_empty_pointer_is_whole_document():
    assert resolve(RFC_DOC, "") is RFC_DOC


@pytest.mark.parametrize(
    "pointer, expected",
    [("/foo", ["bar", "baz"]), ("/foo/0", "bar"), ("/", 0), ("/a~1b", 1), ("/c%d", 2),
     ("/e^f", 3), ("/g|h", 4), ("/i\\j", 5), ('/k"l', 6), ("/ ", 7), ("/m~0n", 8)],
)
def test_rfc_examples(pointer, expected):
    assert resolve(RFC_DOC, pointer) == expected


def test_escaped_tilde_followed_by_one():
    assert resolve({"~1": 10}, "/~01") == 10


def test_parse_pointer_unescapes_in_order():
    assert parse_pointer("/a~01b/~10/~00") == ["a~1b", "/0", "~0"]


def test_nested_lookup():
    doc = {"users": [{"name": "ada"}, {"name": "linus"}]}
    assert resolve(doc, "/users/1/name") == "linus"


@pytest.mark.parametrize("pointer", ["/missing", "/foo/2", "/foo/01", "/foo/-", "/foo/0/x", "foo"])
def test_errors(pointer):
    with pytest.raises(JsonPointerError):
        resolve(RFC_DOC, pointer)
