/* hook: the names of the ops and tags the model hands to the hook. */
#include "tscope/core.h"

#define TS_NAME_ENTRY(e, name) name,
static const char *const op_names[] = {TS_OP_LIST(TS_NAME_ENTRY)};
static const char *const tag_names[] = {TS_TAG_LIST(TS_NAME_ENTRY)};
#undef TS_NAME_ENTRY

_Static_assert(sizeof op_names / sizeof op_names[0] == TS_OP_COUNT, "one name per op");
_Static_assert(sizeof tag_names / sizeof tag_names[0] == TS_TAG_COUNT, "one name per tag");

const char *ts_op_name(ts_op op) { return (unsigned)op < TS_OP_COUNT ? op_names[op] : "?"; }

const char *ts_tag_name(ts_tag tag) { return (unsigned)tag < TS_TAG_COUNT ? tag_names[tag] : "?"; }
