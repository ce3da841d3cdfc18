/*
 * The "text" column of a parquet file as documents, through the Arrow / Parquet C++ libraries that the
 * pyarrow wheel ships (dev/data/data.mk finds them; built into prepare_dataset only when found).
 * parquet_text_open() reads the footer and checks the schema: a file that is not parquet, is truncated,
 * or has no string column "text" fails there, with one line naming the file. Documents come in row
 * order, a batch of rows at a time; a null text is an error naming its row.
 */
#pragma once

#include <memory>

#include "dev/data/prepare_dataset.h"   // DocumentSource

// Opens path as a DocumentSource (fatal() on a bad file). See the top of this file.
std::unique_ptr<DocumentSource> parquet_text_open(const std::string& path);
