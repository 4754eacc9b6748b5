package toolgate.lib_test

import data.toolgate.fixtures_test as fixtures
import data.toolgate.lib

test_skeleton_maps_lookalikes_to_ascii if {
	fixtures.same(lib.skeleton("\u017fE35"), "sE35")
	fixtures.same(lib.skeleton("p\u0430yp\u0430l"), "paypal")
	fixtures.same(lib.skeleton("\uff27\uff22\uff12\uff19"), "GB29")
	fixtures.same(lib.skeleton("a\u200bb\u00a0c"), "ab c")
	fixtures.same(lib.skeleton("plain"), "plain")
}

test_confusables_map_to_ascii if {
	every from, to in lib.confusables {
		count(from) == 1
		lib.ascii_printable(to)
	}
}

test_lookalikes if {
	lib.has_confusable("\u0421\u041d93")
	not lib.has_confusable("CH93")
	lib.lookalike("p\u0430ypal", "paypal")
	not lib.lookalike("paypal", "paypal")
	not lib.lookalike("paypa1", "paypal")
}

test_scripts if {
	fixtures.same(lib.scripts_of("p\u0430ypal"), {"latin", "cyrillic"})
	fixtures.same(lib.scripts_of("12-34"), set())
	lib.mixed_script("p\u0430ypal")
	not lib.mixed_script("paypal")
	not lib.mixed_script("\u043f\u0440\u0438\u0432\u0435\u0442")
}

test_safe_identifier if {
	lib.safe_identifier("GB29 NWBK")
	every s in ["\u017fE35", "GB\uff12", "a\u200bb", "a\nb", 5] {
		not lib.safe_identifier(s)
	}
}
