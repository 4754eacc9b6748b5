package toolgate.lib_test

import data.toolgate.fixtures_test as fixtures
import data.toolgate.lib

test_path_normalize if {
	cases := {"/a//b/./c/": "/a/b/c", "a/./b": "a/b", "/": "/", "": "", "//": "/", "/a/../b": "/a/../b"}
	every p, want in cases {
		fixtures.same([p, lib.path_normalize(p)], [p, want])
	}
}

test_path_checks if {
	lib.path_absolute("/a")
	not lib.path_absolute("a")
	every p in ["..", "../a", "a/..", "/a/../b", "a\\..\\b"] {
		lib.path_has_dot_dot(p)
	}
	every p in ["/a..b", "/...", "/.a"] {
		not lib.path_has_dot_dot(p)
	}
	lib.has_control_character("a\nb")
	lib.has_control_character("a\u007f")
	not lib.has_control_character("caf\u00e9")
}

test_path_at_or_under if {
	lib.path_at_or_under("/srv/a", "/srv")
	lib.path_at_or_under("/srv", "/srv/")
	lib.path_at_or_under("/anything", "/")
	not lib.path_at_or_under("/srvx", "/srv")
	not lib.path_at_or_under("/SRV/a", "/srv")
	not lib.path_at_or_under("/srv/a", "")
	not lib.path_at_or_under(1, "/")
	lib.path_at_or_under_any_case("/SRV/a", "/srv")
	lib.path_at_or_under_any_case("/etc/Shadow/", "/ETC/shadow")
	not lib.path_at_or_under_any_case("/etc/shadowed", "/etc/shadow")
}
