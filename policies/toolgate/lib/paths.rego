package toolgate.lib

# --- file system paths (POSIX) ---------------------------------------------------------------
#
# The policy sees a path as the caller wrote it; it cannot see symbolic links. A tool service
# that reads or deletes files must resolve the path (realpath) before it asks.

# "/a//b/./c/" -> "/a/b/c"; a relative path stays relative ("a/./b" -> "a/b").
path_normalize(p) := concat("", [_path_root(p), concat("/", path_segments(p))]) if is_string(p)

# The segments of `p` without empty and "." segments.
path_segments(p) := [segment | some segment in split(p, "/"); not segment in {"", "."}] if is_string(p)

_path_root(p) := "/" if startswith(p, "/")

_path_root(p) := "" if not startswith(p, "/")

# `p` is absolute.
path_absolute(p) if {
	is_string(p)
	startswith(p, "/")
}

# `p` has a ".." segment ("/" or "\" separated).
path_has_dot_dot(p) if {
	is_string(p)
	regex.match(`(^|[/\\])\.\.([/\\]|$)`, p)
}

# `p` has a control character (U+0000-U+001F, U+007F).
has_control_character(s) if {
	is_string(s)
	regex.match(`[\x00-\x1f\x7f]`, s)
}

# `p` is `dir` or lies under it, after normalizing both; case-sensitive, as POSIX paths are.
# Use it for allow-lists: "/SRV/x" is not under "/srv" on a case-sensitive file system.
path_at_or_under(p, dir) if {
	is_string(p)
	is_string(dir)
	_same_or_below(path_normalize(p), path_normalize(dir))
}

# As path_at_or_under, ignoring case: use it for deny-lists, so that "/ETC/shadow" is caught
# on case-insensitive file systems too.
path_at_or_under_any_case(p, dir) if {
	is_string(p)
	is_string(dir)
	_same_or_below(lower(path_normalize(p)), lower(path_normalize(dir)))
}

_same_or_below(p, dir) if {
	dir != ""
	p == dir
}

_same_or_below(p, "/") if startswith(p, "/")

_same_or_below(p, dir) if {
	not dir in {"", "/"}
	startswith(p, concat("", [dir, "/"]))
}
