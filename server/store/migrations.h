/* The store's schema: the migrations built into this binary, in order (the SQL files
 * of migrations/, embedded and listed by server/CMakeLists.txt). */
#ifndef DDPD_SERVER_STORE_MIGRATIONS_H
#define DDPD_SERVER_STORE_MIGRATIONS_H

#include "migrate.h"

extern const migration ddpd_migrations[];
extern const int ddpd_migrations_count;

#endif
