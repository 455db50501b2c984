import posixpath

import pytest

from path_utils import basename, normalize, split_ext, with_suffix


def test_basename():
    assert basename("a/b/c.txt") == "c.txt"
    assert basename("c.txt") == "c.txt"
    assert basename("a/b/") == ""


def test_split_ext_simple():
    assert split_ext("report.pdf") == ("report", ".pdf")
    assert split_ext("dir/archive.tar.gz") == ("dir/archive.tar", ".gz")


def test_split_ext_without_extension():
    assert split_ext("Makefile") == ("Makefile", "")
    assert split_ext("some.dir/README") == ("some.dir/README", "")


def test_split_ext_dotfiles_have_no_extension():
    assert split_ext(".bashrc") == (".bashrc", "")
    assert split_ext("home/me/.profile") == ("home/me/.profile", "")


@pytest.mark.parametrize(
    "path",
    ["", "/", "a.", ".", "..", "...", "..foo", ".a.b", "x/.a.b", "a/b.c/d", "/etc/.config.bak", "v1.2/notes"],
)
def test_split_ext_matches_posixpath(path):
    assert split_ext(path) == posixpath.splitext(path)


def test_with_suffix():
    assert with_suffix("notes.txt", ".md") == "notes.md"
    assert with_suffix(".bashrc", ".bak") == ".bashrc.bak"
    with pytest.raises(ValueError):
        with_suffix("notes.txt", "md")


@pytest.mark.parametrize(
    "path, expected",
    [("a//b/./c", "a/b/c"), ("/a/b/../c", "/a/c"), ("../x/..", ".."), ("/../a", "/a"), ("", ".")],
)
def test_normalize(path, expected):
    assert normalize(path) == expected
