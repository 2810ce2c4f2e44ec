// How each table of the schema is laid out on a distributed PostgreSQL (Citus), declared in
// one place: a distributed table is split into shards by one column (its distribution
// column), a reference table is copied whole to every node. docs/scaling.md gives the set-up
// this declares (create_distributed_table / create_reference_table) and which statements run
// where.
//
// What makes a schema legal under it, checked over migrations/ by the migration lint
// (LintMigrations, rules "citus-*"): every primary key, unique constraint, unique index and
// exclusion constraint of a distributed table includes its distribution column (with `=` in
// an exclusion constraint), since each is enforced inside one shard; a foreign key from a
// distributed table points at a reference table, or at a distributed table on both tables'
// distribution columns; a reference table has no foreign key to a distributed one; every
// table created is declared here, and a distributed table's column exists.
//
// A new table: add it to kTableDistribution (table_distribution.cc) in the same change as
// the migration that creates it.
#pragma once

#include <string>
#include <vector>

namespace goodput::platform {

struct TableDistribution {
  enum class Kind { kDistributed, kReference };
  std::string table;  // lower case, unqualified
  Kind kind = Kind::kReference;
  std::string column;  // the distribution column of a distributed table, lower case
};

// The project's declaration: one entry per table that migrations/ creates.
const std::vector<TableDistribution>& ProjectTableDistribution();

}  // namespace goodput::platform
