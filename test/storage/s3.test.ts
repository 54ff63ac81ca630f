/** The storage suite (suite.ts) on the `s3` back end. */
import t from 'tap';
import { storageSuite } from './suite.ts';

storageSuite(t, 's3');
