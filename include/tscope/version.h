/* version: tscope's version, written into every trace it makes. */
#ifndef TSCOPE_VERSION_H
#define TSCOPE_VERSION_H

#define TSCOPE_VERSION "0.1.0"

#endif
