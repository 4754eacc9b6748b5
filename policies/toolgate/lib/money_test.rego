package toolgate.lib_test

import data.toolgate.fixtures_test as fixtures
import data.toolgate.lib

test_decimal_arithmetic_is_exact if {
	0.1 + 0.2 == 0.3
	fixtures.same(lib.minor_units(19.99, 2), 1999)
	fixtures.same(lib.minor_units(1000.005, 2), 100001)
	fixtures.same(lib.minor_units(5, 0), 5)
	fixtures.same(lib.amounts_total([0.1, 0.2, "x", null]), 0.3)
}

test_amount_decimals if {
	lib.amount_has_decimals(19.99, 2)
	not lib.amount_has_decimals(19.999, 2)
	lib.amount_has_decimals(1500, 0)
	not lib.amount_has_decimals(15.5, 0)
	not lib.amount_has_decimals("1", 2)
	fixtures.same([lib.decimals_of("EUR"), lib.decimals_of("JPY"), lib.decimals_of("KWD")], [2, 0, 3])
}

test_amount_comparisons if {
	lib.positive_amount(0.01)
	not lib.positive_amount(0)
	not lib.positive_amount("5")
	lib.valid_amount(10.5, 2)
	not lib.valid_amount(10.555, 2)
	not lib.valid_amount(-1, 2)
	lib.amount_over(1000.01, 1000)
	not lib.amount_over(1000, 1000)
	not lib.amount_over("2000", 1000)
	lib.amount_within(1000, 1000)
	not lib.amount_within(1000.001, 1000)
	not lib.amount_within(null, 1000)
}
