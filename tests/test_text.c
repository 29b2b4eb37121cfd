/* text: the edit distance behind every "did you mean", file sizes, and the
 * layer in a step's name. */
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

static void layer_names_parse_whole_components(void **state) {
    (void)state;
    assert_int_equal(ts_name_layer("encoder.layers.3.self_attn.q"), 3);
    assert_int_equal(ts_name_layer("layers.12"), 12);
    assert_int_equal(ts_name_layer("embed.out"), -1);
    assert_int_equal(ts_name_layer("encoder.layers.*.out"), -1);
    assert_int_equal(ts_name_layer("mylayers.2.out"), -1);   /* not a whole component */
    assert_int_equal(ts_name_layer("encoder.layers.2x.out"), -1);
    assert_int_equal((int)ts_name_layer_prefix("decoder.layers.10.cross_attn.k"), (int)strlen("decoder.layers.10"));
    assert_int_equal((int)ts_name_layer_prefix("logits"), 0);
    char buf[64];
    assert_true(ts_name_with_layer(buf, sizeof buf, "encoder.layers.3.out", 11));
    assert_string_equal(buf, "encoder.layers.11.out");
    assert_true(ts_name_with_layer(buf, sizeof buf, "encoder.layers.*.norm1.out", 0));
    assert_string_equal(buf, "encoder.layers.0.norm1.out");
    assert_false(ts_name_with_layer(buf, sizeof buf, "embed.pe", 1));
    assert_false(ts_name_with_layer(buf, 8, "encoder.layers.3.out", 1)); /* does not fit */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edit_distance_counts_single_edits),
        cmocka_unit_test(bytes_pick_a_unit),
        cmocka_unit_test(layer_names_parse_whole_components),
    };
    return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
