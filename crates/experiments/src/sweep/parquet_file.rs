//! A sweep's table as Parquet, the Arrow ecosystem's columnar format (pandas, polars, DuckDB and Spark read it
//! with its types), written with the Apache Arrow project's `parquet` crate. Each column's type is what all its
//! values are, as pandas infers a CSV's: 64-bit integers, else doubles, else UTF-8 text; an empty field is null.
//! `point`, `job` and `error` are always text.

use std::path::Path;
use std::sync::Arc;

use parquet::basic::{LogicalType, Repetition, Type as Physical};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

use super::SweepError;

/// What one column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Integer,
    Double,
    Text,
}

fn kind(name: &str, values: &[&str]) -> Kind {
    let present = || values.iter().filter(|value| !value.is_empty());
    if ["point", "job", "error"].contains(&name) {
        Kind::Text
    } else if present().all(|value| value.parse::<i64>().is_ok()) {
        Kind::Integer
    } else if present().all(|value| value.parse::<f64>().is_ok()) {
        Kind::Double
    } else {
        Kind::Text
    }
}

/// Writes `rows` (fields by `header`'s columns, as the CSV table holds them) to `path` as one row group.
pub fn write(path: &Path, header: &[String], rows: &[Vec<String>]) -> Result<(), SweepError> {
    let shown = path.display().to_string();
    let failed = |error: parquet::errors::ParquetError| SweepError::Io {
        path: shown.clone(),
        source: std::io::Error::other(error.to_string()),
    };
    let columns: Vec<Vec<&str>> = (0..header.len())
        .map(|column| rows.iter().map(|row| row.get(column).map_or("", String::as_str)).collect())
        .collect();
    let kinds: Vec<Kind> = header.iter().zip(&columns).map(|(name, values)| kind(name, values)).collect();
    let fields = header
        .iter()
        .zip(&kinds)
        .map(|(name, kind)| {
            let builder = match kind {
                Kind::Integer => Type::primitive_type_builder(name, Physical::INT64),
                Kind::Double => Type::primitive_type_builder(name, Physical::DOUBLE),
                Kind::Text => Type::primitive_type_builder(name, Physical::BYTE_ARRAY)
                    .with_logical_type(Some(LogicalType::String)),
            };
            builder.with_repetition(Repetition::OPTIONAL).build().map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed)?;
    let schema = Arc::new(Type::group_type_builder("sweep").with_fields(fields).build().map_err(failed)?);
    let file = std::fs::File::create(path).map_err(|source| SweepError::Io { path: shown.clone(), source })?;
    let mut writer =
        SerializedFileWriter::new(file, schema, Arc::new(WriterProperties::builder().build())).map_err(failed)?;
    let mut group = writer.next_row_group().map_err(failed)?;
    let mut index = 0;
    while let Some(mut column) = group.next_column().map_err(failed)? {
        let values = &columns[index];
        let levels: Vec<i16> = values.iter().map(|value| i16::from(!value.is_empty())).collect();
        let present = values.iter().filter(|value| !value.is_empty());
        match kinds[index] {
            Kind::Integer => {
                let numbers: Vec<i64> = present.filter_map(|value| value.parse().ok()).collect();
                column.typed::<Int64Type>().write_batch(&numbers, Some(&levels), None).map_err(failed)?;
            }
            Kind::Double => {
                let numbers: Vec<f64> = present.filter_map(|value| value.parse().ok()).collect();
                column.typed::<DoubleType>().write_batch(&numbers, Some(&levels), None).map_err(failed)?;
            }
            Kind::Text => {
                let texts: Vec<ByteArray> = present.map(|value| ByteArray::from(*value)).collect();
                column.typed::<ByteArrayType>().write_batch(&texts, Some(&levels), None).map_err(failed)?;
            }
        }
        column.close().map_err(failed)?;
        index += 1;
    }
    group.close().map_err(failed)?;
    writer.close().map_err(failed)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_is_typed_as_all_its_values_are() {
        assert_eq!(kind("iodepth", &["1", "", "16"]), Kind::Integer);
        assert_eq!(kind("read_kiops", &["1", "2.5", ""]), Kind::Double);
        assert_eq!(kind("iodepth", &["1", "many"]), Kind::Text);
        assert_eq!(kind("job", &["1", "2"]), Kind::Text, "a job's name stays text");
    }
}
