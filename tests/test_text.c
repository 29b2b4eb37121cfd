/* text: the edit distance behind every "did you mean", and file sizes. */
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edit_distance_counts_single_edits),
        cmocka_unit_test(bytes_pick_a_unit),
    };
    return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
