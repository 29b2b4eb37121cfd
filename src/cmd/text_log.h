/* text_log: TSCOPE_TEXT_LOG=FILE, every text drawn with its size (text_log.c). */
#ifndef TSCOPE_CMD_TEXT_LOG_H
#define TSCOPE_CMD_TEXT_LOG_H

void ts_text_log_begin(void); /* from the environment; nothing when unset */
void ts_text_log_end(void);

#endif
