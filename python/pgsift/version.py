"""pgsift's version and its releases: the one source for pyproject.toml (read by setuptools),
`pgsift.__version__` and the extension's versions (pgsift.extension)."""

VERSION = "0.2.0"

# Each release, oldest first: its version and the last migration it shipped. An extension
# upgrade script from a release runs the migrations after that one; tests install the
# release itself from its git tag (v + version).
RELEASES: dict[str, str] = {
    "0.1.0": "0017_spaces_review",
}
