import pytest

from semver import Version


def test_parse_full_version():
    v = Version.parse("1.2.3-rc.1+build.5")
    assert (v.major, v.minor, v.patch) == (1, 2, 3)
    assert v.prerelease == ("rc", "1")
    assert v.build == ("build", "5")


@pytest.mark.parametrize("text", ["1.2", "01.2.3", "1.2.3-", "v1.2.3"])
def test_parse_rejects_invalid(text):
    with pytest.raises(ValueError):
        Version.parse(text)


def test_core_fields_compare_numerically():
    assert Version.parse("1.9.0") < Version.parse("1.10.0")
    assert Version.parse("2.0.0") > Version.parse("1.99.99")


def test_prerelease_sorts_before_release():
    assert Version.parse("1.0.0-alpha") < Version.parse("1.0.0")


def test_build_metadata_is_ignored():
    assert Version.parse("1.0.0+a") == Version.parse("1.0.0+b")


def test_numeric_prerelease_identifiers():
    assert Version.parse("1.4.0-rc.2") < Version.parse("1.4.0-rc.10")
    assert max(Version.parse(f"1.4.0-rc.{n}") for n in range(1, 12)) == Version.parse("1.4.0-rc.11")


def test_spec_precedence_example():
    expected = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
    ]
    shuffled = [expected[i] for i in (5, 2, 7, 0, 4, 6, 1, 3)]
    assert [str(v) for v in sorted(Version.parse(t) for t in shuffled)] == expected


def test_str_round_trip():
    assert str(Version.parse("3.1.4-beta.2+exp.sha.5114f85")) == "3.1.4-beta.2+exp.sha.5114f85"
