// Parquet input of prepare_dataset: see dev/data/parquet_text.h.
#include "dev/data/parquet_text.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>

namespace {

constexpr int64_t ROWS_PER_BATCH = 8192;

struct ParquetText final : DocumentSource {
    std::string path;
    std::unique_ptr<parquet::arrow::FileReader> reader;
    std::shared_ptr<arrow::RecordBatchReader> batches;
    uint64_t num_rows = 0;
    uint64_t row = 0;   // rows read

    [[noreturn]] void fail(const std::string& what) const {
        fatal("cannot read parquet file '%s' (truncated or not parquet?): %s", path.c_str(), what.c_str());
    }
    template <typename T>
    T value_or_fail(arrow::Result<T> r) const {
        if (!r.ok()) fail(r.status().ToString());
        return std::move(r).ValueUnsafe();
    }
    void check(const arrow::Status& s) const {
        if (!s.ok()) fail(s.ToString());
    }

    uint64_t rows() const override { return num_rows; }

    template <typename Array>
    void append(const Array& a, std::deque<std::string>* docs) {
        for (int64_t i = 0; i < a.length(); i++) {
            if (a.IsNull(i)) fatal("parquet file '%s' row %llu has no text (null)", path.c_str(), (unsigned long long)(row + i));
            const auto v = a.GetView(i);
            docs->emplace_back(v.data(), v.size());
        }
        row += a.length();
    }

    bool next(std::deque<std::string>* docs) override {
        try {
            std::shared_ptr<arrow::RecordBatch> batch;
            check(batches->ReadNext(&batch));
            if (batch == nullptr) return false;
            const std::shared_ptr<arrow::Array>& col = batch->column(0);
            switch (col->type_id()) {
                case arrow::Type::STRING: append(static_cast<const arrow::StringArray&>(*col), docs); break;
                case arrow::Type::LARGE_STRING: append(static_cast<const arrow::LargeStringArray&>(*col), docs); break;
                case arrow::Type::STRING_VIEW: append(static_cast<const arrow::StringViewArray&>(*col), docs); break;
                default: fatal("parquet file '%s': the 'text' column holds %s, not strings", path.c_str(),
                               col->type()->ToString().c_str());
            }
            return true;
        } catch (const std::exception& e) {   // parquet::ParquetException from a corrupt page
            fail(e.what());
        }
    }
};

}  // namespace

std::unique_ptr<DocumentSource> parquet_text_open(const std::string& path) {
    auto src = std::make_unique<ParquetText>();
    src->path = path;
    try {
        std::shared_ptr<arrow::io::ReadableFile> file = src->value_or_fail(arrow::io::ReadableFile::Open(path));
        parquet::ArrowReaderProperties props;
        props.set_batch_size(ROWS_PER_BATCH);
        parquet::arrow::FileReaderBuilder builder;
        src->check(builder.Open(file));
        builder.properties(props);
        src->check(builder.Build(&src->reader));
        std::shared_ptr<arrow::Schema> schema;
        src->check(src->reader->GetSchema(&schema));
        const int field = schema->GetFieldIndex("text");
        if (field < 0) {
            std::string names;
            for (const auto& f : schema->fields()) names += (names.empty() ? "" : ", ") + f->name();
            fatal("parquet file '%s' has no 'text' column (columns: %s)", path.c_str(), names.c_str());
        }
        const arrow::Type::type kind = schema->field(field)->type()->id();
        if (kind != arrow::Type::STRING && kind != arrow::Type::LARGE_STRING && kind != arrow::Type::STRING_VIEW) {
            fatal("parquet file '%s': the 'text' column holds %s, not strings", path.c_str(),
                  schema->field(field)->type()->ToString().c_str());
        }
        const auto meta = src->reader->parquet_reader()->metadata();
        const int leaf = meta->schema()->ColumnIndex("text");
        if (leaf < 0) fatal("parquet file '%s': 'text' is not a plain column", path.c_str());
        src->num_rows = (uint64_t)meta->num_rows();
        std::vector<int> groups(src->reader->num_row_groups());
        for (size_t g = 0; g < groups.size(); g++) groups[g] = (int)g;
        src->batches = src->value_or_fail(src->reader->GetRecordBatchReader(groups, {leaf}));
    } catch (const std::exception& e) {
        src->fail(e.what());
    }
    return src;
}
