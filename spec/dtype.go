package spec

import "fmt"

// DataType is an element type; its values equal NCCL's ncclDataType_t.
type DataType int32

const (
	Int8       DataType = 0
	Uint8      DataType = 1
	Int32      DataType = 2
	Uint32     DataType = 3
	Int64      DataType = 4
	Uint64     DataType = 5
	Float16    DataType = 6
	Float32    DataType = 7
	Float64    DataType = 8
	Bfloat16   DataType = 9
	Float8e4m3 DataType = 10
	Float8e5m2 DataType = 11
	NumTypes   DataType = 12
)

var typeInfo = [NumTypes]struct {
	name string
	size int
}{
	{"int8", 1}, {"uint8", 1}, {"int32", 4}, {"uint32", 4}, {"int64", 8}, {"uint64", 8},
	{"float16", 2}, {"float32", 4}, {"float64", 8}, {"bfloat16", 2}, {"float8e4m3", 1}, {"float8e5m2", 1},
}

// Valid reports whether t is one of the NumTypes data types.
func (t DataType) Valid() bool { return t >= 0 && t < NumTypes }

// Size is the element size in bytes; 0 for an invalid type.
func (t DataType) Size() int {
	if !t.Valid() {
		return 0
	}
	return typeInfo[t].size
}

func (t DataType) String() string {
	if !t.Valid() {
		return fmt.Sprintf("dtype(%d)", int32(t))
	}
	return typeInfo[t].name
}

// IsFloat reports whether t is a floating-point type.
func (t DataType) IsFloat() bool {
	switch t {
	case Float16, Float32, Float64, Bfloat16, Float8e4m3, Float8e5m2:
		return true
	}
	return false
}

// IsFloat8 reports whether t is one of the 8-bit floating-point types.
func (t DataType) IsFloat8() bool { return t == Float8e4m3 || t == Float8e5m2 }

// IsSigned reports whether t is a signed integer type.
func (t DataType) IsSigned() bool { return t == Int8 || t == Int32 || t == Int64 }
