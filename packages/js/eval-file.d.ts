// Types for `oma-component/eval/file` (OMA: `@open-multi-agent/core/eval/file`). Node only.
import type {
  AppendResult, DeleteResult, EvalDeleteQuery, EvalQuery, EvalRecord, EvalRetentionPolicy, EvalStore, Page,
} from './eval.js'

export declare const FILE_EVAL_STORE_FORMAT: 'oma.file_eval_store'
export declare const FILE_EVAL_STORE_FORMAT_VERSION: 1

export type FileEvalStoreErrorCode =
  | 'INVALID_PATH' | 'OPEN_FAILED' | 'READ_FAILED' | 'WRITE_FAILED' | 'SYNC_FAILED' | 'CORRUPT_FILE'
  | 'UNSUPPORTED_FILE_FORMAT' | 'UNSUPPORTED_EVAL_SCHEMA' | 'RECOVERY_FAILED' | 'STALE_COMPACTION_FILE'
  | 'RENAME_FAILED' | 'COMPACTION_FAILED' | 'CLOSED' | 'RECOVERY_REQUIRED'

/** A lifecycle or file-system failure of the store; it never holds a record. */
export declare class FileEvalStoreError extends Error {
  readonly code: FileEvalStoreErrorCode
  readonly operation?: string
  readonly path?: string
  readonly lineNumber?: number
  readonly causeCode?: string
}

export interface FileStoreDiagnostic {
  readonly code: 'trailing_partial_line' | 'incomplete_batch' | 'stale_compaction_file' | 'directory_sync_unsupported'
  readonly severity: 'warning'
  readonly lineNumber?: number
  readonly message: string
}

export interface FileEvalStoreOptions {
  /** The clock retention reads (milliseconds). */
  readonly now?: () => number
  readonly onDiagnostic?: (diagnostic: FileStoreDiagnostic) => void
}

/** The evaluation store in a durable NDJSON file, for one process at a time. */
export declare class FileEvalStore implements EvalStore {
  static open(path: string, options?: FileEvalStoreOptions): Promise<FileEvalStore>
  readonly filePath: string
  readonly compactionTempPath: string
  readonly isClosed: boolean
  getDiagnostics(): FileStoreDiagnostic[]
  append(records: readonly EvalRecord[]): Promise<AppendResult>
  query(query?: EvalQuery): Promise<Page<EvalRecord>>
  delete(query: EvalDeleteQuery): Promise<DeleteResult>
  applyRetention(policy: EvalRetentionPolicy): Promise<DeleteResult>
  records(): EvalRecord[]
  flush(): Promise<void>
  compact(): Promise<{ recordsWritten: number; fileSizeBytes: number }>
  close(): Promise<void>
}
