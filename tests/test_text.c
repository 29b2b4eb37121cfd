/* text: the edit distance behind every "did you mean", file sizes, and whole
 * numbers read by type. */
#include <string.h>

#include "check.h"
#include "tscope/core.h"

static void edit_distance_counts_single_edits(void **state) {
    (void)state;
    assert_int_equal(ts_text_edit_distance("weights", "weights"), 0);
    assert_int_equal(ts_text_edit_distance("weigths", "weights"), 2); /* a swap is two edits */
    assert_int_equal(ts_text_edit_distance("weight", "weights"), 1);
    assert_int_equal(ts_text_edit_distance("", "abc"), 3);
    assert_int_equal(ts_text_edit_distance("kitten", "sitting"), 3);
    char long_name[300];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_true(ts_text_edit_distance(long_name, "a") > 1000);
}

static void bytes_pick_a_unit(void **state) {
    (void)state;
    char buf[32];
    assert_string_equal(ts_text_bytes(buf, sizeof buf, 2048), "2.0 KB");
    assert_string_equal(ts_text_bytes(buf, sizeof buf, (uint64_t)3 << 20), "3.0 MB");
    assert_string_equal(ts_text_bytes(buf, sizeof buf, (uint64_t)3 << 29), "1.50 GB");
}

/* Whole numbers by type: every digit read, the range checked, nothing
 * wrapped round, no space or trailing byte taken (issue 47). */
static void whole_numbers_are_read_by_type(void **state) {
    (void)state;
    int64_t x = 7;
    assert_true(ts_text_int("-9223372036854775808", INT64_MIN, INT64_MAX, &x) && x == INT64_MIN);
    assert_true(ts_text_int("9223372036854775807", INT64_MIN, INT64_MAX, &x) && x == INT64_MAX);
    assert_true(ts_text_int("+5", 0, 9, &x) && x == 5);
    static const char *const refused[] = {"9223372036854775808", "-9223372036854775809", "4294967297", " 5", "5 ",
                                          "5x", "", "-", "+", "+-5", "0x10", "1e3", "2.0"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        x = 7;
        if (ts_text_int(refused[i], INT32_MIN, INT32_MAX, &x) || x != 7) fail_msg("'%s' was read as %lld", refused[i], (long long)x);
    }
    assert_false(ts_text_int(NULL, 0, 1, &x));
    /* inside a name: the rest is handed back */
    const char *rest = ts_text_int_prefix("12.ln_1", 0, 100, &x);
    assert_true(rest && x == 12 && strcmp(rest, ".ln_1") == 0);
    assert_null(ts_text_int_prefix("4294967296.ln_1", 0, INT32_MAX, &x));
    assert_null(ts_text_int_prefix("+3", 0, 100, &x));
    /* ranges */
    int64_t a = -1, b = -1;
    assert_true(ts_text_range("3-7", 10, false, &a, &b) && a == 3 && b == 7);
    assert_true(ts_text_range("4", 10, true, &a, &b) && a == 4 && b == 4);
    static const char *const bad_ranges[] = {"4", "7-3", "3-11", "-1-3", "3--5", "3-+5", "3-5x", "3- 5", "3-", "-",
                                             "4294967299-4294967300"};
    for (size_t i = 0; i < sizeof bad_ranges / sizeof bad_ranges[0]; i++)
        if (ts_text_range(bad_ranges[i], 10, false, &a, &b)) fail_msg("range '%s' was read as %lld-%lld", bad_ranges[i],
                                                                        (long long)a, (long long)b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edit_distance_counts_single_edits),
        cmocka_unit_test(bytes_pick_a_unit),
        cmocka_unit_test(whole_numbers_are_read_by_type),
    };
    return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
